#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/checkpoint.h"
#include "tests/checkpoint/synth_checkpoint.h"

int main(void)
{
    char dir[] = "/tmp/ckpt-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    model_config c = synth_r1_layout_config();
    if (synth_write_checkpoint(dir, &c, 1 << 20)) { printf("write failed\n"); return 1; }
    char err[512];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    checkpoint *ck = checkpoint_open(dir, err, sizeof err);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (!ck) { printf("open failed: %s\n", err); return 1; }
    printf("%d tensors %d shards in %.3f s\n", ck->n_tensors, ck->n_shards, (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9);
    checkpoint_close(ck);
    return 0;
}
