/* Number and label formatting shared by the report's text, HTML and series views: readable
 * numbers (no exponents), byte sizes, and per-layer names with the MTP layer called by its role. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "cli/report_render.h"

double report_num(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItem(o, key);
    return cJSON_IsNumber(x) ? x->valuedouble : cJSON_IsBool(x) ? cJSON_IsTrue(x) : 0;
}

int report_layer(const cJSON *o)
{
    double v = report_num(o, "layer");
    return v >= 0 && v <= 1e6 ? (int)v : -1;
}

const char *report_str(const cJSON *o, const char *key)
{
    const cJSON *x = cJSON_GetObjectItem(o, key);
    return cJSON_IsString(x) ? x->valuestring : "";
}

/* 4730 -> "4,730", 0.1234 -> "0.123", 12.5 -> "12.50": never an exponent. */
const char *report_fmt(double v, int decimals, char *buf, size_t n)
{
    if (!isfinite(v)) { snprintf(buf, n, "-"); return buf; }
    char digits[64];
    snprintf(digits, sizeof digits, "%.*f", decimals, fabs(v));
    char *dot = strchr(digits, '.');
    int int_len = dot ? (int)(dot - digits) : (int)strlen(digits), k = 0;
    char out[96];
    if (v < 0 && strspn(digits, "0.") != strlen(digits)) out[k++] = '-';
    for (int i = 0; i < int_len; i++) {
        if (i > 0 && (int_len - i) % 3 == 0) out[k++] = ',';
        out[k++] = digits[i];
    }
    snprintf(out + k, sizeof out - k, "%s", dot ? dot : "");
    snprintf(buf, n, "%s", out);
    return buf;
}

/* Bytes in binary units: "812 KiB", "15.12 MiB", "2.31 GiB". */
const char *report_bytes(double v, char *buf, size_t n)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (fabs(v) >= 1024 && u < 4) { v /= 1024; u++; }
    char num[64];
    snprintf(buf, n, "%s %s", report_fmt(v, u == 0 ? 0 : 2, num, sizeof num), units[u]);
    return buf;
}

/* The label of layer l in per-layer tables and charts: the MTP layer is named as such. */
void report_layer_label(const cJSON *r, int layer, char *buf, size_t n)
{
    const cJSON *nl = cJSON_GetObjectItem(r, "model_layers");
    if (cJSON_IsNumber(nl) && layer == nl->valueint) snprintf(buf, n, "MTP (layer %d)", layer);
    else snprintf(buf, n, "layer %d", layer);
}

