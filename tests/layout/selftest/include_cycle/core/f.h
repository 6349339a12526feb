#include "core/a.h"
/* #include "core/f.h" is a comment */
