#ifndef B
#define B
#include "core/a.h"
#endif
