#!/bin/sh
# Regenerates the seed corpus of fuzz_request (tests/fuzz/corpus_request/):
# one valid and a few invalid Request payloads of every operation, written
# in protobuf text format below and encoded with `protoc --encode` (no
# network, no Python module). The binary seeds are committed; rerun this
# after changing proto/omld.proto or the fixtures in fuzz_request.c.
# Ids known to the fixtures: query view a0 a1 a2 b0 b1 b2 c0 c1 u0 (+ "late"
# only in the store, "gone" only in the view); engine state e0..e5
# (e0 ~ e1 similar, e0 !~ e3 dissimilar). Dimension 8.
set -eu
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus_request
mkdir -p "$out"
rm -f "$out"/*
V='values: [1, 0, 0.5, 0, -1, 0, 0, 2]'
F='features: [1, 0, 0.5, 0, -1, 0, 0, 2]'
seed() { # name text
    printf '%s\n' "$2" | protoc --encode=omld.Request --proto_path=proto proto/omld.proto >"$out/$1"
}
# ---- envelope
seed empty ''
seed id_only 'request_id: 18446744073709551615'
seed unknown_field 'request_id: 1 put_items { items { id: "e9" '"$F"' } }'
printf '\010\001\370\007\005' >"$out/unknown_tag"           # field 127 varint: skipped, body unset
# ---- put_items
seed put_ok 'request_id: 2 put_items { items { id: "n0" '"$F"' label: "x" } items { id: "e1" '"$F"' } }'
seed put_empty 'request_id: 3 put_items { }'
seed put_dup 'request_id: 4 put_items { items { id: "n0" '"$F"' } items { id: "n0" '"$F"' } }'
seed put_nan 'request_id: 5 put_items { items { id: "n0" features: [1, 0, nan, 0, 0, 0, 0, 0] } }'
seed put_inf 'request_id: 5 put_items { items { id: "n0" features: [1, 0, 0, 0, 0, 0, 0, -inf] } }'
seed put_dim 'request_id: 6 put_items { items { id: "n0" features: [1, 2, 3] } }'
seed put_noid 'request_id: 7 put_items { items { '"$F"' } }'
seed put_badutf8 'request_id: 8 put_items { items { id: "\377\376" '"$F"' } }'
seed put_longid "request_id: 9 put_items { items { id: \"$(printf 'x%.0s' $(seq 256))\" $F } }"
seed put_emptylabel 'request_id: 10 put_items { items { id: "n1" '"$F"' label: "" } }'
seed put_utf8 'request_id: 11 put_items { items { id: "\303\251t\303\251" '"$F"' label: "\342\202\254" } }'
# ---- delete_items
seed delete_ok 'request_id: 20 delete_items { ids: "e2" ids: "e5" }'
seed delete_missing 'request_id: 21 delete_items { ids: "e2" ids: "nope" }'
seed delete_missing_ok 'request_id: 22 delete_items { ids: "nope" ids: "e4" missing_ok: true }'
seed delete_empty 'request_id: 23 delete_items { }'
seed delete_dup 'request_id: 24 delete_items { ids: "e2" ids: "e2" }'
# ---- get_items
seed get_ok 'request_id: 30 get_items { ids: "a0" ids: "u0" ids: "late" }'
seed get_unknown 'request_id: 31 get_items { ids: "a0" ids: "gone" }'
seed get_empty 'request_id: 32 get_items { }'
# ---- add_triplets
seed triplets_ok 'request_id: 40 add_triplets { triplets { anchor { id: "e0" } positive { id: "e1" } negative { id: "e3" } } triplets { anchor { vector { '"$V"' } } positive { id: "e2" } negative { id: "e4" } } }'
seed triplets_unknown 'request_id: 41 add_triplets { triplets { anchor { id: "e0" } positive { id: "zz" } negative { id: "e3" } } }'
seed triplets_missing 'request_id: 42 add_triplets { triplets { anchor { id: "e0" } positive { id: "e1" } } }'
seed triplets_dim 'request_id: 43 add_triplets { triplets { anchor { vector { values: [1] } } positive { id: "e1" } negative { id: "e3" } } }'
seed triplets_empty 'request_id: 44 add_triplets { }'
# ---- add_pairs
seed pairs_ok 'request_id: 50 add_pairs { pairs { a { id: "e1" } b { id: "e2" } relation: SIMILAR } pairs { a { id: "e2" } b { id: "e4" } relation: DISSIMILAR } }'
seed pairs_conflict 'request_id: 51 add_pairs { pairs { a { id: "e1" } b { id: "e3" } relation: SIMILAR } }'
seed pairs_batch_conflict 'request_id: 52 add_pairs { pairs { a { id: "e2" } b { id: "e4" } relation: SIMILAR } pairs { a { id: "e4" } b { id: "e2" } relation: DISSIMILAR } }'
seed pairs_self 'request_id: 53 add_pairs { pairs { a { id: "e2" } b { id: "e2" } relation: DISSIMILAR } }'
seed pairs_vector 'request_id: 54 add_pairs { pairs { a { vector { '"$V"' } } b { id: "e2" } relation: SIMILAR } }'
seed pairs_unspecified 'request_id: 55 add_pairs { pairs { a { id: "e1" } b { id: "e2" } } }'
seed pairs_unknown 'request_id: 56 add_pairs { pairs { a { id: "e1" } b { id: "nope" } relation: SIMILAR } }'
# ---- classify
seed classify_id 'request_id: 60 classify { query { id: "a0" } k: 3 }'
seed classify_vector 'request_id: 61 classify { query { vector { '"$V"' } } }'
seed classify_late 'request_id: 62 classify { query { id: "late" } k: 16 model: "live" }'
seed classify_gone 'request_id: 63 classify { query { id: "gone" } }'
seed classify_k0 'request_id: 64 classify { query { id: "a0" } k: 0 }'
seed classify_kbig 'request_id: 65 classify { query { id: "a0" } k: 17 }'
seed classify_model 'request_id: 66 classify { query { id: "a0" } model: "batch-1" }'
seed classify_noquery 'request_id: 67 classify { k: 2 }'
# ---- verify
seed verify_ok 'request_id: 70 verify { a { id: "a0" } b { vector { '"$V"' } } threshold: 0.7 }'
seed verify_same 'request_id: 71 verify { a { id: "b1" } b { id: "b1" } }'
seed verify_threshold 'request_id: 72 verify { a { id: "a0" } b { id: "b0" } threshold: 1.5 }'
seed verify_threshold_nan 'request_id: 73 verify { a { id: "a0" } b { id: "b0" } threshold: nan }'
seed verify_missing 'request_id: 74 verify { a { id: "a0" } }'
seed verify_unknown 'request_id: 75 verify { a { id: "a0" } b { id: "nope" } model: "" }'
# ---- retrieve
seed retrieve_ok 'request_id: 80 retrieve { query { id: "c0" } k: 5 }'
seed retrieve_all 'request_id: 81 retrieve { query { vector { '"$V"' } } k: 16 }'
seed retrieve_utf8 'request_id: 82 retrieve { query { id: "\303\251t\303\251" } k: 2 }'
seed retrieve_badmodel 'request_id: 83 retrieve { query { id: "c0" } model: "\377x" }'
# ---- query batches
seed classify_batch_ok 'request_id: 94 classify_batch { queries { query { id: "a0" } k: 3 } queries { query { vector { '"$V"' } } } queries { query { id: "late" } model: "live" } }'
seed classify_batch_empty 'request_id: 95 classify_batch { }'
seed classify_batch_gone 'request_id: 96 classify_batch { queries { query { id: "a1" } } queries { query { id: "gone" } } }'
seed classify_batch_models 'request_id: 97 classify_batch { queries { query { id: "a0" } } queries { query { id: "a1" } model: "batch-1" } }'
seed retrieve_batch_ok 'request_id: 98 retrieve_batch { queries { query { id: "c0" } k: 5 labels: "x" exclude_ids: "a0" } queries { query { vector { '"$V"' } } k: 2 offset: 3 min_similarity: 0.1 } }'
seed retrieve_batch_kbig 'request_id: 99 retrieve_batch { queries { query { id: "c0" } } queries { query { id: "c1" } k: 17 } }'
# ---- embed
seed embed_ok 'request_id: 90 embed { item { id: "u0" } }'
seed embed_vector 'request_id: 91 embed { item { vector { '"$V"' } } model: "live" }'
seed embed_noitem 'request_id: 92 embed { }'
seed embed_nan 'request_id: 93 embed { item { vector { values: [1, 0, 0, 0, 0, 0, 0, nan] } } }'
# ---- status, health, checkpoint
seed status 'request_id: 100 status { }'
seed health 'request_id: 101 health { }'
seed checkpoint 'request_id: 102 checkpoint { }'
# ---- auth, batch trainer and model registry (ADMIN / MUTATION routes)
seed auth 'request_id: 110 auth { token: "secret" }'
seed train_start 'request_id: 111 train_start { method: "triplet" name: "m1" }'
seed train_status 'request_id: 112 train_status { job_id: 1 }'
seed train_status_zero 'request_id: 113 train_status { job_id: 0 }'
seed list_models 'request_id: 114 list_models { }'
seed delete_model 'request_id: 115 delete_model { name: "m1" }'
seed promote 'request_id: 116 promote { name: "m1" }'
seed promote_data 'request_id: 117 promote { name: "m1" model_data: "x" }'
seed promote_noname 'request_id: 118 promote { }'
seed rollback 'request_id: 119 rollback { }'
# ---- metadata: on items, and filters (equality, set membership, AND)
M='metadata { key: "color" values: "red" values: "blue" } metadata { key: "size" values: "L" }'
seed meta_put 'request_id: 120 put_items { items { id: "n2" '"$F"' metadata { key: "color" value: "red" } metadata { key: "size" value: "L" } } }'
seed meta_put_dupkey 'request_id: 121 put_items { items { id: "n2" '"$F"' metadata { key: "k" value: "a" } metadata { key: "k" value: "b" } } }'
seed meta_put_many 'request_id: 122 put_items { items { id: "n2" '"$F"' metadata { key: "a" } metadata { key: "b" } metadata { key: "c" } metadata { key: "d" } metadata { key: "e" } } }'
seed meta_put_longkey 'request_id: 123 put_items { items { id: "n2" '"$F"' metadata { key: "a-key-longer-than-16" value: "v" } } }'
seed meta_retrieve 'request_id: 124 retrieve { query { id: "c0" } k: 5 '"$M"' }'
seed meta_classify 'request_id: 125 classify { query { id: "a0" } k: 3 '"$M"' }'
seed meta_recommend 'request_id: 126 recommend { positive { id: "a0" } k: 3 '"$M"' }'
seed meta_list 'request_id: 127 list_items { limit: 10 '"$M"' }'
seed meta_count 'request_id: 128 count_items { labels: "x" '"$M"' }'
seed meta_delete 'request_id: 129 delete_items { '"$M"' }'
seed meta_novalues 'request_id: 130 count_items { metadata { key: "color" } }'
seed meta_batch 'request_id: 131 classify_batch { queries { query { id: "a0" } '"$M"' } }'
# ---- regressions: an unknown id whose 201st byte ends a 2-byte UTF-8
# character (199 ASCII bytes + "\303\251"); error messages once cut it in half
LONG199=$(printf 'y%.0s' $(seq 199))
seed apply_unknown_id_utf8_cut "request_id: 90 add_triplets { triplets { anchor { id: \"e0\" } positive { id: \"e1\" } negative { id: \"${LONG199}\\303\\251\" } } }"
seed delete_unknown_id_utf8_cut "request_id: 91 delete_items { ids: \"${LONG199}\\303\\251\" }"
echo "wrote $(ls "$out" | wc -l) seeds to $out"
