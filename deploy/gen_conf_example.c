/* gen_conf_example.c - writes deploy/omld.conf.example from the daemon's own
 * option table (daemon/options.c), so the example cannot drift from omld.
 *
 * Usage: omld-gen-conf-example [OUTPUT]   (default: stdout)
 *
 * Every option is written uncommented with its default, so the file loads
 * as it is and `omld --config omld.conf.example --print-config` equals
 * `omld --print-config`. Above each line: the description, the type, the
 * bounds (exact, from the table) and the default. Built and run by
 * deploy/CMakeLists.txt (target omld-conf-example); the ctest
 * deploy_conf_example_current fails when the committed file differs. */
#include <stdio.h>
#include <string.h>

#include "options.h"

/* A bound as text: integers exactly, reals shortest-ish. */
static void bound(char *out, size_t n, const omld_option *o, double v)
{
    if (o->type == OMLD_OPT_INT)
        snprintf(out, n, "%.0f", v);
    else
        snprintf(out, n, "%.9g", v);
}

static void write_example(FILE *f)
{
    fputs("# omld.conf.example - every option of omld with its default, bounds and\n"
          "# description.\n"
          "#\n"
          "# GENERATED from the daemon's option table (daemon/options.c) by\n"
          "# deploy/gen_conf_example.c; do not edit by hand. To regenerate:\n"
          "#   cmake --build BUILD --target omld-conf-example\n"
          "#\n"
          "# Syntax: one `name = value` per line; `#` starts a comment; blank lines\n"
          "# are ignored. Precedence: built-in defaults < this file (--config FILE)\n"
          "# < command-line flags (--name value), wherever they stand. Every value\n"
          "# below is the built-in default: delete the lines you do not change, or\n"
          "# keep them to pin the value across upgrades. For the model options an\n"
          "# empty value means \"the preset's value\". `omld --config FILE\n"
          "# --print-config` prints the effective configuration and exits.\n",
          f);
    for (const omld_option *o = omld_options; o->name; o++) {
        fprintf(f, "\n# %s\n", o->help);
        char lo[64], hi[64];
        switch (o->type) {
        case OMLD_OPT_STR:
            fprintf(f, "# string, at most %.0f bytes; default: %s\n", o->max,
                    o->def[0] ? o->def : "empty");
            break;
        case OMLD_OPT_INT:
        case OMLD_OPT_REAL:
            bound(lo, sizeof lo, o, o->min);
            bound(hi, sizeof hi, o, o->max);
            fprintf(f, "# %s in [%s, %s]; default: %s\n",
                    o->type == OMLD_OPT_INT ? "integer" : "real", lo, hi,
                    o->def[0] ? o->def : "empty (the preset's value)");
            break;
        }
        fprintf(f, "%s =%s%s\n", o->name, o->def[0] ? " " : "", o->def);
    }
}

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && (strcmp(argv[1], "--help") == 0 || argv[1][0] == '\0'))) {
        fprintf(argc > 2 ? stderr : stdout, "usage: %s [OUTPUT]\n", argv[0]);
        return argc > 2 ? 2 : 0;
    }
    FILE *f = stdout;
    if (argc == 2 && (f = fopen(argv[1], "w")) == NULL) {
        perror(argv[1]);
        return 1;
    }
    write_example(f);
    if (fflush(f) != 0 || ferror(f) || (f != stdout && fclose(f) != 0)) {
        perror(argc == 2 ? argv[1] : "stdout");
        return 1;
    }
    return 0;
}
