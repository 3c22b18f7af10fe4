/* models.h - the registry of named batch models and their serving views.
 *
 * A batch model (src/batch.h: a trunk of `depth` ReLU layers and one head at
 * that depth) is served with ALL the live serving code, as the live-layout
 * snapshot oml_promote_snapshot makes of it (src/promote.h). Each model
 * owns an omld_views (its own indexer thread) over the same store, so its
 * index covers every stored item; the engine calls
 * omld_models_store_changed() when it publishes a live view after items
 * changed, and every model's index is rebuilt off to the side (latest
 * wins, as for the live view). The first view of a model is built
 * synchronously when it is added, so a registered model always answers.
 *
 * Lifetime: queries take a reference on a model's current view
 * (omld_models_acquire); DeleteModel removes the entry and stops its
 * indexer, and a view still held by a query stays alive until released.
 *
 * Files: <data_dir>/models/NAME.omlb in the format of src/batchfile.h,
 * written atomically. Loaded at startup; a damaged or incompatible file is
 * skipped with a warning (renamed NAME.omlb.bad). Thread-safe. */
#ifndef OMLD_MODELS_H
#define OMLD_MODELS_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "batchfile.h"
#include "config.h"
#include "metrics.h"
#include "snapshot.h"
#include "store.h"
#include "view.h"

#define OMLD_MODEL_NAME_MAX OML_BATCHFILE_NAME_MAX
#define OMLD_MODELS_MAX 64

typedef struct omld_model_info {
    char name[OMLD_MODEL_NAME_MAX + 1];
    char method[32];
    char variant[32];
    int32_t depth;
    uint64_t created_ms;    /* Unix ms */
    float val_r1;
    int32_t epochs_run;
    uint64_t items_indexed;
    uint32_t trained_items;
    uint64_t job_id;
    uint64_t index_version;
} omld_model_info;

typedef struct omld_models omld_models;

/* live: the live model's configuration (dim, L, hidden, emb). store / lock
 * borrowed (the engine's). 0 or -1. */
int omld_models_create(omld_models **out, const char *data_dir, const oml_config *live,
                       const oml_store *store, omld_store_lock *lock);
/* Stops every model's indexer and frees. Accepts NULL. */
void omld_models_destroy(omld_models *reg);

/* Loads data_dir/models/\*.omlb. The caller must be able to read the store
 * (holds its read lock or owns it). Returns the number loaded. */
int omld_models_load(omld_models *reg);

/* 1 if name is a valid model name: 1..255 bytes of [A-Za-z0-9._-], not
 * starting with '.', not "live". */
int omld_model_name_ok(const char *name);

/* Registers a trained model (takes ownership of bm, also on failure): writes
 * its file, builds its first view (takes the store's read lock). 0, or -1
 * with err (a name in use, too many models, I/O). */
int omld_models_add(omld_models *reg, const omld_model_info *meta, oml_batch_model *bm,
                    char *err, size_t errlen);

/* 1 if a model of that name exists. */
int omld_models_exists(omld_models *reg, const char *name);

/* The current view of a model, referenced (omld_view_release), or NULL. */
omld_view *omld_models_acquire(omld_models *reg, const char *name);

/* A malloc'd copy of a model's encoded bytes (oml_batch_model_encode) and
 * its depth. 0, or OML_ENOTFOUND / OML_ENOMEM. */
int omld_models_bytes(omld_models *reg, const char *name, uint8_t **buf, size_t *len);

/* Removes a model and its file. 0 or OML_ENOTFOUND. */
int omld_models_delete(omld_models *reg, const char *name);

/* The stored items changed: rebuild every model's index (asynchronously). */
void omld_models_store_changed(omld_models *reg);

/* Fills up to cap entries sorted by name; returns how many models exist. */
int omld_models_list(omld_models *reg, omld_model_info *out, int cap);

#endif
