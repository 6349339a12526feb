/* Each rule names the two flags and what the user should do instead. The prompt comes from
 * exactly one place (-p, -f, --ids or --chat=FILE; --chat alone wraps -p/-f), and a flag whose
 * effect the other flags cancel is refused rather than ignored. */
#include "cli/run_conflicts.h"

int run_options_check_conflicts(const run_options *o, const char *cmd)
{
    int text = o->prompt_text || o->prompt_file;
    if (o->prompt_text && o->prompt_file)
        return flags_usage_error(cmd, "-p and -f both give the prompt text; use one");
    if (o->ids && (text || o->chat_wrap))
        return flags_usage_error(cmd, "--ids is the whole prompt; it cannot be combined with %s",
                                 o->prompt_text ? "-p" : o->prompt_file ? "-f" : "--chat");
    if (o->messages_file && text)
        return flags_usage_error(cmd, "--chat=%s is the whole conversation, so %s would be ignored (--chat without a file wraps -p/-f as one user turn)",
                                 o->messages_file, o->prompt_text ? "-p" : "-f");
    if (o->no_bos && (o->ids || o->chat_wrap))
        return flags_usage_error(cmd, "--no-bos applies to -p/-f text only (%s)",
                                 o->ids ? "--ids are used exactly as given" : "the chat template writes BOS itself");
    if (o->telemetry_every != 16 && !o->telemetry_path) /* 16: run_options_defaults' value */
        return flags_usage_error(cmd, "--telemetry-every sets how often --telemetry writes; give --telemetry FILE");
    return 0;
}
