/* `dsspec report`'s renderer on arbitrary JSON: a run report, an ab report, or one line saying it
 * is neither; text and the HTML page both rendered (into /dev/null). */
#include <stdio.h>
#include <stdlib.h>
#include "cli/report.h"
#include "tests/fuzz/fuzz_util.h"

static FILE *sink;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    if (!(sink = fopen("/dev/null", "w"))) fuzz_fail("cannot open /dev/null");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *json = fuzz_cstring(data, size);
    report_render(json, "fuzz.json", "/dev/null", sink);
    free(json);
    return 0;
}
