#include "core/d.h"
