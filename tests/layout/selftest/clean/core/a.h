#include "core/b.h"
int a_get(int x);
