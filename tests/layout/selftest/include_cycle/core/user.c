#include "core/f.h"
#include "core/c.h"
