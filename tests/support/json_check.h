/* json_check.h - checking JSON in tests: a strict RFC 8259 validator
 * (recursive descent) and a second opinion from Python's json module. */
#ifndef OML_TEST_JSON_CHECK_H
#define OML_TEST_JSON_CHECK_H

#include <stddef.h>

/* 1 if s (n bytes) is exactly one well-formed JSON value. */
int oml_test_json_valid(const char *s, size_t n);

/* Pipes text into `python3 -c SCRIPT`; 1 if the script exits 0, 0 if not,
 * -1 if there is no python3. */
int oml_test_python_check(const char *text, const char *script);

#endif
