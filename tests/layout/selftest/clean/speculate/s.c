#include "speculate/s.h"
#include "core/a.h"
int s(void) { return a_get(2); }
