#include "core/c.h"
