#include "engine/e.h"
#include "core/a.h"
