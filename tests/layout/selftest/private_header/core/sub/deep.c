#include "core/core_internal.h"
