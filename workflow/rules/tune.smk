rule tune:
    input:
        unpack(tune_timed),
        sources=variant_sources,
        committed=committed_tuning,
        compiled=tune_compiled,
    output:
        "results/tune/{gpu}/{family}/{variant}/{mode}.picked.json",
    log:
        "results/logs/tune/{gpu}/{family}/{variant}/{mode}.log",
    benchmark:
        "results/benchmarks/tune/{gpu}/{family}/{variant}/{mode}.tsv"
    priority: gpu_first(tuning_gpus)
    conda:
        "../../environment.yml"
    resources:
        gpu=tuning_gpus,
    params:
        config=lambda w: json.dumps(config_for(config, "tune", f"{w.family}/{w.variant}", w.mode)),
        space=lambda w: variant_of(w).space,
        timed=lambda w: tune_timed(w).get("timed", ""),
    shell:
        "python -m gemmbench.job tune --config {params.config:q} --log {log:q} "
        "--variant {wildcards.family}/{wildcards.variant} --mode {wildcards.mode} --gpu {wildcards.gpu} "
        "--out {output:q} --timed {params.timed:q} --holds-gpu {resources.gpu}"


# The tuning record: the tune job's picks with what the compiler makes of each (their generated code, which a record
# is migrated on), compiled here beside the GPU's jobs rather than in the tune job, which holds the GPU.
rule tune_code:
    input:
        sources=variant_sources,
        picked="results/tune/{gpu}/{family}/{variant}/{mode}.picked.json",
    output:
        "results/tune/{gpu}/{family}/{variant}/{mode}.json",
    log:
        "results/logs/tune_code/{gpu}/{family}/{variant}/{mode}.log",
    benchmark:
        "results/benchmarks/tune_code/{gpu}/{family}/{variant}/{mode}.tsv"
    conda:
        "../../environment.yml"
    params:
        config=lambda w: config_for(config, "tune", f"{w.family}/{w.variant}", w.mode),
    script:
        "../scripts/tune_code.py"


# A search's candidates compiled beside the GPU's jobs (as builds are), so that the tune job holds the GPU only to
# validate and time them: planned only where the tune job will search. The GPU's next search waits for it, so it goes
# before the builds and tune_code jobs ready beside it, which feed only measure jobs that can wait: a first run's GPU
# idled while they took the cores (reports/examples/h200-first-run).
rule tune_compile:
    input:
        sources=variant_sources,
        committed=committed_tuning,
    output:
        "results/tune/{gpu}/{family}/{variant}/{mode}.compiled.json",
    log:
        "results/logs/tune_compile/{gpu}/{family}/{variant}/{mode}.log",
    benchmark:
        "results/benchmarks/tune_compile/{gpu}/{family}/{variant}/{mode}.tsv"
    priority: 1
    conda:
        "../../environment.yml"
    threads: compile_threads
    resources:
        gpu=gpus_needed,
    params:
        config=lambda w: config_for(config, "tune", f"{w.family}/{w.variant}", w.mode),
        space=lambda w: variant_of(w).space,
    script:
        "../scripts/tune_compile.py"


# A variant specialised per shape (tune_timed): its trials, timed on the GPU; the tune job checks and audits the picks
# once tune_check_compile has compiled the checks' kernels beside the GPU's jobs. Shell commands, as measure's: both
# are on the GPU's serial path.
rule tune_trials:
    input:
        sources=variant_sources,
        committed=committed_tuning,
        compiled=tune_compiled,
    output:
        "results/tune/{gpu}/{family}/{variant}/{mode}.trials.json",
    log:
        "results/logs/tune_trials/{gpu}/{family}/{variant}/{mode}.log",
    benchmark:
        "results/benchmarks/tune_trials/{gpu}/{family}/{variant}/{mode}.tsv"
    priority: gpu_first(gpus_needed)
    conda:
        "../../environment.yml"
    resources:
        gpu=gpus_needed,
    params:
        config=lambda w: json.dumps(config_for(config, "tune", f"{w.family}/{w.variant}", w.mode)),
        space=lambda w: variant_of(w).space,
    shell:
        "python -m gemmbench.job tune_trials --config {params.config:q} --log {log:q} "
        "--variant {wildcards.family}/{wildcards.variant} --mode {wildcards.mode} --gpu {wildcards.gpu} "
        "--out {output:q}"


rule tune_check_compile:
    input:
        sources=variant_sources,
        timed="results/tune/{gpu}/{family}/{variant}/{mode}.trials.json",
    output:
        "results/tune/{gpu}/{family}/{variant}/{mode}.checks.json",
    log:
        "results/logs/tune_check_compile/{gpu}/{family}/{variant}/{mode}.log",
    benchmark:
        "results/benchmarks/tune_check_compile/{gpu}/{family}/{variant}/{mode}.tsv"
    priority: 1  # as tune_compile's: the search's tune job waits for it
    conda:
        "../../environment.yml"
    threads: compile_threads
    resources:
        gpu=gpus_needed,
    params:
        config=lambda w: config_for(config, "tune", f"{w.family}/{w.variant}", w.mode),
    script:
        "../scripts/tune_check_compile.py"
