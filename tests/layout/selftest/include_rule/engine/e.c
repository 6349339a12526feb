#include "tests/helper.h"
#include "core/missing.h"
