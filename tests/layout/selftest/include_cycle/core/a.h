#ifndef A
#define A
#include "core/b.h"
#endif
