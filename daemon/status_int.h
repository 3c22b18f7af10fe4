/* status_int.h - what /status (status.c) and /metrics (metrics_text.c)
 * share. */
#ifndef OMLD_STATUS_INT_H
#define OMLD_STATUS_INT_H

#include <stdint.h>

#include "status.h"

/* Omld__Status__Code names, index = value (proto/omld.proto). */
extern const char *const omld_code_names[OMLD_STATUS_CODES];

/* The model's heads, within [0, OML_MAX_HEADS]. */
int omld_status_heads(const omld_model_stats *m);

/* num / den, 0 when den is 0. */
double omld_status_ratio(uint64_t num, uint64_t den);

/* Age of the newest checkpoint, or of the process when there is none. */
uint64_t omld_checkpoint_age_ms(const omld_status_input *in, const omld_model_stats *m);

#endif
