#include "engine/e.h"
#include "cli/cli.h"
int main(void) { return e(); }
