/* csv.h - a labelled data set from a CSV file (oml-eval / omlctl eval --csv).
 *
 * The format, one item per line:
 *     label,f1,f2,...,fd
 *  - label: any string of 1..255 bytes (what is stored as the item's label);
 *    classes get ids 0, 1, ... in order of first appearance.
 *  - f1..fd: finite numbers (strtod syntax, read as float); every row has the
 *    same number of fields.
 *  - Fields are split at every comma (no quoting: a field cannot hold a
 *    comma) and trimmed of spaces and tabs; "\r\n" line ends are accepted.
 *  - Blank lines and lines starting with '#' are skipped.
 *  - An optional header: the first line that is not skipped is a header iff
 *    NONE of its feature fields is a number (e.g. "class,x1,x2"). A first line
 *    with some numeric feature fields is a data row, and its first field that
 *    is not a number is an error. A header fixes the field count too.
 * A malformed file is refused with a message naming the file, line and field,
 * e.g.  data.csv:17: field 5: "abc" is not a number. */
#ifndef OML_CSV_H
#define OML_CSV_H

#include "dataset.h"
#include "err.h"

#define OML_CSV_LABEL_MAX 255 /* bytes: the daemon's limit on a label */

/* Reads path into *ds (owned: oml_dataset_free). Errors, with diag->msg the
 * whole message ("PATH:LINE: field F: ..."): OML_EIO (cannot open or read),
 * OML_EFORMAT (a malformed row, no data rows), OML_ENOMEM. */
int oml_csv_read(const char *path, oml_dataset *ds, oml_diag *diag);

#endif
