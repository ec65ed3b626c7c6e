#!/usr/bin/env bash
# Mutation testing (mutmut 3.8.1) of the all-on render's package, one module at a time, each with its own small
# selection of the generated tests.
#
#   scripts/mutation-audit.sh [MODULE...] [--sample N] [--seed S] [--min-killed PCT]
#
#   MODULE        metrics layouts sources decoding transforms samplers loaders config optim ema files checkpoint
#                 checkpoint_file continuation engine inference (default: all of them)
#   --sample N    test only a seeded random sample of N mutants of the chosen modules (for CI: a few minutes)
#   --seed S      the sample's seed (default 0)
#   --min-killed  exit 1 when the killed share (killed / mutants, in %) of what ran is below PCT (default 0)
#
#   MUTATION_AUDIT_DIR   work folder (default: a new temporary folder); each module runs in its own copy of the
#                        render there, so `cd $MUTATION_AUDIT_DIR/mod-MODULE && mutmut show NAME` works afterwards
#   MODULE_TIMEOUT       seconds one module's mutmut run may take (default 3600; a hang fails instead of waiting)
#   PYTHON               the interpreter with cookiecutter, pytest, torch and mutmut==3.8.1 (default: .venv/bin/python)
#
# Prints the per-module table and writes it to $MUTATION_AUDIT_DIR/table.md; surviving mutant names go to
# $MUTATION_AUDIT_DIR/survivors.txt. Uses one core: mutmut --max-children 1, one thread per process.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
MODULE_TIMEOUT=${MODULE_TIMEOUT:-3600}
HELPER="$ROOT/scripts/mutation_audit.py"
PACKAGE=allon
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1

# The test files that exercise each module, kept small so that every mutant's tests run in seconds. mutmut runs,
# per mutant, only the tests of the selection that called the mutated function (in-process: a function reached
# only in a subprocess or a signal handler counts as "no tests"). Tests marked slow (signals, torchrun, worker
# processes) are left out everywhere.
SEL_metrics=(tests/test_metrics.py tests/test_reports.py tests/test_train.py)
SEL_layouts=(tests/test_layouts.py tests/test_datasets.py)
# test_config.py: its quick round trip only (the other tests train dozens of runs)
SEL_config=(tests/test_train.py tests/test_data.py tests/test_layerwise_lr.py tests/test_errors.py tests/test_config.py
    --deselect=tests/test_config.py::test_each_option_reaches_what_it_configures
    --deselect=tests/test_config.py::test_the_seed_fixes_every_random_stream
    --deselect=tests/test_config.py::test_equal_configs_build_equal_runs
    tests/test_ema.py::test_the_decay_range_is_zero_included_to_one_excluded
    tests/test_mixup.py::test_the_cutmix_chance_is_a_probability_edges_included
    tests/test_label_smoothing.py::test_the_smoothing_is_in_zero_included_to_one_excluded
    tests/test_checkpoint.py::test_init_from_and_resume_together_are_refused
    tests/test_checkpoint.py::test_resume_of_a_checkpoint_path_reads_the_config_yaml_beside_it)
SEL_optim=(tests/test_train.py tests/test_layerwise_lr.py tests/test_freezing.py tests/test_optim.py)
SEL_ema=(tests/test_ema.py)
SEL_files=(tests/test_files.py tests/test_errors.py)
# the folder variant of the bitwise-resume test repeats the synthetic one, at 3 s a mutant: left out
SEL_checkpoint=(tests/test_checkpoint.py
    "--deselect=tests/test_checkpoint.py::test_resumed_run_equals_an_uninterrupted_one_bitwise[held out, balanced-0]")
# the data modules besides layouts.py share one selection. test_train.py: its direct unit tests of data/ only (its
# other tests train)
DATA_TESTS=(tests/test_data.py tests/test_datasets.py
    tests/test_train.py::test_synthetic_splits_have_their_sizes_and_seeds
    tests/test_train.py::test_a_downloadable_dataset_goes_into_data_root
    tests/test_train.py::test_loaders_follow_the_config_transforms_weights_and_memory_pinning
    tests/test_train.py::test_photos_are_validated_on_a_centre_crop_of_the_image_resized_to_8_7_of_it
    tests/test_train.py::test_the_balanced_sampler_draws_from_the_loaders_generator_only
    tests/test_train.py::test_the_data_summary_lists_the_classes_and_counts_the_rest
    tests/test_train.py::test_data_that_leaves_a_split_empty_is_refused_naming_it
    tests/test_train.py::test_normalisation_is_the_given_one_imagenets_for_pretrained_or_the_datas_own
    tests/test_distributed.py::test_each_split_of_a_distributed_job_gets_its_sampler
    tests/test_distributed.py::test_balanced_sampling_gives_each_rank_its_own_share_of_one_global_draw)
SEL_sources=("${DATA_TESTS[@]}")
SEL_decoding=("${DATA_TESTS[@]}")
SEL_transforms=("${DATA_TESTS[@]}")
SEL_samplers=("${DATA_TESTS[@]}")
SEL_loaders=("${DATA_TESTS[@]}")
SEL_engine=(tests/test_train.py tests/test_grad_clipping.py tests/test_mixup.py tests/test_speed_tricks.py
    tests/test_distributed.py::test_accumulation_all_reduces_once_per_group_not_per_batch
    tests/test_distributed.py::test_a_rank_stops_when_its_own_or_another_ranks_loss_diverged_and_says_which
    tests/test_debugging.py::test_detect_anomaly_names_the_operation_behind_a_nan_gradient)
SEL_inference=(tests/test_datasets.py tests/test_features.py tests/test_amp.py
    tests/test_reports.py::test_each_evaluated_path_gets_its_own_evaluation_folder_beside_the_weights
    tests/test_reports.py::test_a_missing_or_imageless_path_to_predict_on_is_named
    tests/test_reports.py::test_predicting_on_several_folders_takes_the_images_of_each
    tests/test_reports.py::test_evaluate_uses_the_class_names_the_weights_carry_and_warns_when_classes_txt_differs
    tests/test_reports.py::test_evaluate_refuses_what_does_not_fit_the_run_in_one_line_each
    tests/test_reports.py::test_an_evaluation_with_tta_gets_its_own_folder_named_after_the_data
    tests/test_run_folder.py::test_a_planted_link_in_place_of_an_evaluation_folder_is_replaced
    tests/test_run_folder.py::test_predict_never_writes_over_a_file_that_holds_no_predictions)
SEL_checkpoint_file=("${SEL_checkpoint[@]}")
SEL_continuation=("${SEL_checkpoint[@]}")
ALL_MODULES=(metrics layouts sources decoding transforms samplers loaders config optim ema files checkpoint checkpoint_file
    continuation engine inference)

main() {  # one function: bash has read all of it before it starts, so editing this file mid-run is safe
local modules=() sample=0 seed=0 min_killed=0 module names copy start arguments item dotted
while (($#)); do
    case $1 in
        --sample) sample=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --min-killed) min_killed=$2; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *) modules+=("$1"); shift ;;
    esac
done
((${#modules[@]})) || modules=("${ALL_MODULES[@]}")
for module in "${modules[@]}"; do
    declare -p "SEL_$module" >/dev/null 2>&1 || { echo "unknown module $module (known: ${ALL_MODULES[*]})" >&2; exit 2; }
done
"$PYTHON" -c 'import importlib.metadata as m; v = m.version("mutmut"); assert v == "3.8.1", v' \
    || { echo "needs mutmut==3.8.1 in $PYTHON's environment: $PYTHON -m pip install mutmut==3.8.1" >&2; exit 2; }

local WORK RENDER ALL_ON
WORK=${MUTATION_AUDIT_DIR:-$(mktemp -d -t mutation-audit.XXXXXX)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
echo "work folder: $WORK"

# 1. The all-on render (fresh every time: results must belong to the template as it is now).
rm -rf "$WORK/render" "$WORK"/mod-* "$WORK/seconds.txt" "$WORK/sample.txt"
ALL_ON=$("$PYTHON" "$ROOT/scripts/named_answers.py" all-on)  # every trick in the registry (set -e stops a failure)
# shellcheck disable=SC2086  # the answers are words
"$PYTHON" -m cookiecutter --no-input -o "$WORK/render" "$ROOT" project_name=$PACKAGE $ALL_ON
RENDER="$WORK/render/$PACKAGE"

# 2. --sample: draw the mutants up front, from the same generator mutmut uses.
if ((sample > 0)); then
    "$PYTHON" "$HELPER" sample "$RENDER" "$PACKAGE" "$sample" "$seed" "${modules[@]}" >"$WORK/sample.txt"
fi

# 3. One copy of the render per module: its own [tool.mutmut] table (test selection) and its own mutants/ cache.
for module in "${modules[@]}"; do
    declare -n selection="SEL_$module"
    names=()
    if ((sample > 0)); then
        mapfile -t names < <(awk -v m="$module" '$1 == m {print $2}' "$WORK/sample.txt")
        ((${#names[@]})) || continue  # nothing of this module drawn
    fi
    copy="$WORK/mod-$module"
    cp -a "$RENDER" "$copy"
    arguments=()
    for item in "${selection[@]}"; do  # a test file this render lacks would stop pytest: skip it, and say so
        if [[ $item == -* || -e "$copy/${item%%::*}" ]]; then arguments+=("$item"); else echo "  (no $item here)"; fi
    done
    "$PYTHON" "$HELPER" configure "$copy/pyproject.toml" "$PACKAGE" "$module" "${arguments[@]}" -m "not slow"
    echo "== $module: ${arguments[*]} ${names[*]:+(${#names[@]} sampled mutants)}"
    start=$(date +%s)
    # Without names: every mutant of the module (only_mutate limits the generation to it).
    # timeout: mutmut waits forever when its clean run fails leaving child processes behind (DataLoader workers)
    dotted=$("$PYTHON" "$HELPER" dotted "$copy" "$PACKAGE" "$module")
    (cd "$copy" && timeout -k 10 "$MODULE_TIMEOUT" "$PYTHON" -m mutmut run --max-children 1 \
        "${names[@]:-$dotted.*}") >"$WORK/$module.log" 2>&1 || {
        echo "mutmut failed or ran past ${MODULE_TIMEOUT} s for $module, see $WORK/$module.log" >&2
        tail -c 3000 "$WORK/$module.log" | tr '\r' '\n' | tail -20 >&2
        exit 1
    }
    echo "$module $(($(date +%s) - start))" >>"$WORK/seconds.txt"
    unset -n selection
done

# 4. The table (and the exit status against --min-killed).
[[ -f "$WORK/seconds.txt" ]] || { echo "no module ran" >&2; exit 1; }
local samplefile=""
((sample == 0)) || samplefile="$WORK/sample.txt"
"$PYTHON" "$HELPER" table "$WORK" "$PACKAGE" "$WORK/table.md" "$min_killed" $samplefile
}

main "$@"; exit
