#include "core/b.h"
#include "core/core_internal.h"
static int helper(int x) { return x + 1; } /* shadows a.c's helper: no edge b.c -> a.c */
struct holder { int a_get; };
int b_get(int x)
{
    struct holder h = {x};
    // a_get(x) in a comment is no use
    return helper(h.a_get) /* a member named a_get is no use either */;
}
