/* Prints, for every code point 0..10FFFF, the major general category PCRE2 (this machine's
 * libpcre2) assigns it: one of L M N P S Z C (C = other, including unassigned), surrogates as C.
 * Input to gen_unicode_delta.js. Build: cc -O2 pcre2_categories.c -lpcre2-8 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>

int main(void)
{
    static const char cats[] = "LMNPSZ";
    pcre2_code *re[6];
    pcre2_match_data *md = NULL;
    for (int i = 0; i < 6; i++) {
        char pat[16];
        snprintf(pat, sizeof pat, "\\p{%c}", cats[i]);
        int code; PCRE2_SIZE at;
        re[i] = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code, &at, NULL);
        if (!re[i]) return 1;
        if (!md) md = pcre2_match_data_create_from_pattern(re[i], NULL);
    }
    for (unsigned cp = 0; cp <= 0x10FFFF; cp++) {
        char c = 'C';
        if (cp < 0xD800 || cp > 0xDFFF) {
            unsigned char s[4]; size_t n;
            if (cp < 0x80) { s[0] = (unsigned char)cp; n = 1; }
            else if (cp < 0x800) { s[0] = 0xC0 | cp >> 6; s[1] = 0x80 | (cp & 0x3F); n = 2; }
            else if (cp < 0x10000) { s[0] = 0xE0 | cp >> 12; s[1] = 0x80 | ((cp >> 6) & 0x3F); s[2] = 0x80 | (cp & 0x3F); n = 3; }
            else { s[0] = 0xF0 | cp >> 18; s[1] = 0x80 | ((cp >> 12) & 0x3F); s[2] = 0x80 | ((cp >> 6) & 0x3F); s[3] = 0x80 | (cp & 0x3F); n = 4; }
            for (int i = 0; i < 6; i++)
                if (pcre2_match(re[i], s, n, 0, 0, md, NULL) > 0) { c = cats[i]; break; }
        }
        putchar(c);
    }
    pcre2_match_data_free(md);
    for (int i = 0; i < 6; i++) pcre2_code_free(re[i]);
    return 0;
}
