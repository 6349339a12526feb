/* a.c uses b.c; b.c uses nothing of a.c (its own static helper is not a.c's) */
#include "core/a.h"
#include "core/core_internal.h"
#include "core_internal.h"
#include <stdio.h>
#include "cjson/cJSON.h" /* a library's header, not a module */
struct ops { int (*helper)(int); };
int a_get(int x)
{
    const char *s = "b_get { ( }"; /* braces in strings and comments do not count: { */
    (void)s;
    return b_get(x) + helper(x);
}
int helper(int x) { return x; }
