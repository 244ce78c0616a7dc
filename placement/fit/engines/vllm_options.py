"""vLLM's command-line flags by release, as its OpenAI server's argparse parser holds them.

Data, read from each release's wheel on PyPI: every option string of `make_arg_parser` (the
parser of `vllm serve` and of `-m vllm.entrypoints.openai.api_server`), one word per argparse
action, its aliases joined by `|` (`--tensor-parallel-size|-tp`). Where they come from:
`vllm/engine/arg_utils.py` (`EngineArgs.add_cli_args`, `AsyncEngineArgs.add_cli_args`: each
`add_argument` call's option strings) and the frontend's `cli_args.py` (`FrontendArgs`: one
`--field-name` per dataclass field, plus the literal ones of `make_arg_parser`), at
`vllm/entrypoints/openai/cli_args.py` in 0.10.2 and 0.11.0 and `vllm/entrypoints/common/cli_args.py`
in 0.33.0 and 0.34.0. An action that is argparse's `BooleanOptionalAction` (given so, or a `bool`
field of the config dataclass its kwargs come from, `_compute_kwargs` in arg_utils.py) also holds
`--no-NAME`; argparse adds `-h|--help` itself. A release close to the one before is written as
its change from it (`argparse_flags.changed`), in the same order.
"""

from __future__ import annotations

from placement.fit.engines.argparse_flags import changed

# Option strings, one argparse action a word (aliases joined by `|`).
_V0_10_2 = """
-h|--help --runner --convert --task --tokenizer --tokenizer-mode
--trust-remote-code|--no-trust-remote-code --dtype --seed --hf-config-path
--allowed-local-media-path --revision --code-revision --rope-scaling --rope-theta
--tokenizer-revision --max-model-len --quantization|-q --enforce-eager|--no-enforce-eager
--max-seq-len-to-capture --max-logprobs --logprobs-mode
--disable-sliding-window|--no-disable-sliding-window
--disable-cascade-attn|--no-disable-cascade-attn
--skip-tokenizer-init|--no-skip-tokenizer-init
--enable-prompt-embeds|--no-enable-prompt-embeds --served-model-name
--disable-async-output-proc --config-format --hf-token --hf-overrides
--override-pooler-config --logits-processor-pattern --generation-config
--override-generation-config --enable-sleep-mode|--no-enable-sleep-mode --model-impl
--override-attention-dtype --logits-processors --io-processor-plugin --load-format
--download-dir --safetensors-load-strategy --model-loader-extra-config --ignore-patterns
--use-tqdm-on-load|--no-use-tqdm-on-load --pt-load-map-location --guided-decoding-backend
--guided-decoding-disable-fallback|--no-guided-decoding-disable-fallback
--guided-decoding-disable-any-whitespace|--no-guided-decoding-disable-any-whitespace
--guided-decoding-disable-additional-properties|--no-guided-decoding-disable-additional-properties
--reasoning-parser --distributed-executor-backend --pipeline-parallel-size|-pp
--tensor-parallel-size|-tp --decode-context-parallel-size|-dcp --data-parallel-size|-dp
--data-parallel-rank|-dpn --data-parallel-start-rank|-dpr --data-parallel-size-local|-dpl
--data-parallel-address|-dpa --data-parallel-rpc-port|-dpp --data-parallel-backend|-dpb
--data-parallel-hybrid-lb|--no-data-parallel-hybrid-lb
--enable-expert-parallel|--no-enable-expert-parallel --enable-eplb|--no-enable-eplb
--eplb-config --num-redundant-experts --eplb-window-size --eplb-step-interval
--eplb-log-balancedness|--no-eplb-log-balancedness --max-parallel-loading-workers
--ray-workers-use-nsight|--no-ray-workers-use-nsight
--disable-custom-all-reduce|--no-disable-custom-all-reduce --worker-cls
--worker-extension-cls --enable-multimodal-encoder-data-parallel --block-size
--gpu-memory-utilization --kv-cache-memory-bytes --swap-space --kv-cache-dtype
--num-gpu-blocks-override --enable-prefix-caching|--no-enable-prefix-caching
--prefix-caching-hash-algo --cpu-offload-gb --calculate-kv-scales|--no-calculate-kv-scales
--kv-sharing-fast-prefill|--no-kv-sharing-fast-prefill --mamba-cache-dtype
--mamba-ssm-cache-dtype --limit-mm-per-prompt --media-io-kwargs --mm-processor-kwargs
--mm-processor-cache-gb --disable-mm-preprocessor-cache --mm-encoder-tp-mode
--interleave-mm-strings|--no-interleave-mm-strings
--skip-mm-profiling|--no-skip-mm-profiling --enable-lora|--no-enable-lora
--enable-lora-bias|--no-enable-lora-bias --max-loras --max-lora-rank --lora-extra-vocab-size
--lora-dtype --max-cpu-loras --fully-sharded-loras|--no-fully-sharded-loras
--default-mm-loras --show-hidden-metrics-for-version --otlp-traces-endpoint
--collect-detailed-traces --max-num-batched-tokens --max-num-seqs --max-num-partial-prefills
--max-long-partial-prefills --cuda-graph-sizes --long-prefill-token-threshold
--num-lookahead-slots --scheduler-delay-factor --preemption-mode --scheduling-policy
--enable-chunked-prefill|--no-enable-chunked-prefill
--disable-chunked-mm-input|--no-disable-chunked-mm-input --scheduler-cls
--disable-hybrid-kv-cache-manager|--no-disable-hybrid-kv-cache-manager
--async-scheduling|--no-async-scheduling --speculative-config --kv-transfer-config
--kv-events-config --compilation-config|-O --additional-config --disable-log-stats
--enable-log-requests|--no-enable-log-requests
--disable-log-requests|--no-disable-log-requests --model --headless --api-server-count|-asc
--config --host --port --uds --uvicorn-log-level
--disable-uvicorn-access-log|--no-disable-uvicorn-access-log
--allow-credentials|--no-allow-credentials --allowed-origins --allowed-methods
--allowed-headers --api-key --lora-modules --chat-template --chat-template-content-format
--response-role --ssl-keyfile --ssl-certfile --ssl-ca-certs
--enable-ssl-refresh|--no-enable-ssl-refresh --ssl-cert-reqs --root-path --middleware
--return-tokens-as-token-ids|--no-return-tokens-as-token-ids
--disable-frontend-multiprocessing|--no-disable-frontend-multiprocessing
--enable-request-id-headers|--no-enable-request-id-headers
--enable-auto-tool-choice|--no-enable-auto-tool-choice
--exclude-tools-when-tool-choice-none|--no-exclude-tools-when-tool-choice-none
--tool-call-parser --tool-parser-plugin --tool-server --log-config-file --max-log-len
--disable-fastapi-docs|--no-disable-fastapi-docs
--enable-prompt-tokens-details|--no-enable-prompt-tokens-details
--enable-server-load-tracking|--no-enable-server-load-tracking
--enable-force-include-usage|--no-enable-force-include-usage
--enable-tokenizer-info-endpoint|--no-enable-tokenizer-info-endpoint
--enable-log-outputs|--no-enable-log-outputs --h11-max-incomplete-event-size
--h11-max-header-count --log-error-stack|--no-log-error-stack
"""

_V0_33_0 = """
-h|--help --runner --convert --tokenizer --tokenizer-mode
--trust-remote-code|--no-trust-remote-code --dtype --seed --hf-config-path
--allowed-local-media-path --allowed-media-domains --revision --code-revision
--tokenizer-revision --max-model-len --quantization|-q --quantization-config
--allow-deprecated-quantization|--no-allow-deprecated-quantization
--enforce-eager|--no-enforce-eager
--enable-return-routed-experts|--no-enable-return-routed-experts
--return-sampling-mask|--no-return-sampling-mask --max-logprobs --logprobs-mode
--use-fp64-gumbel|--no-use-fp64-gumbel --enable-trace-replay|--no-enable-trace-replay
--disable-sliding-window|--no-disable-sliding-window
--disable-cascade-attn|--no-disable-cascade-attn
--skip-tokenizer-init|--no-skip-tokenizer-init
--enable-prompt-embeds|--no-enable-prompt-embeds --served-model-name --config-format
--hf-token|--no-hf-token --hf-overrides --model-class-overrides --pooler-config
--generation-config --override-generation-config --enable-sleep-mode|--no-enable-sleep-mode
--sleep-mode-backend --sleep-mode-offload-cudagraph|--no-sleep-mode-offload-cudagraph
--sleep-preserve-parameter-names --enable-cumem-allocator|--no-enable-cumem-allocator
--enable-nccl-comm-suspend|--no-enable-nccl-comm-suspend --model-impl --logits-processors
--io-processor-plugin --renderer-num-workers --load-format --download-dir
--safetensors-load-strategy --safetensors-prefetch-num-threads
--safetensors-prefetch-block-size --model-loader-extra-config --ignore-patterns
--use-tqdm-on-load|--no-use-tqdm-on-load --pt-load-map-location --attention-backend
--mamba-backend --mamba-ssu-algorithm
--enable-mamba-cache-stochastic-rounding|--no-enable-mamba-cache-stochastic-rounding
--mamba-cache-philox-rounds --reasoning-parser --reasoning-parser-plugin
--distributed-executor-backend --pipeline-parallel-size|-pp --master-addr --master-port
--nnodes|-n --node-rank|-r --distributed-timeout-seconds --cpu-distributed-timeout-seconds
--numa-bind|--no-numa-bind --numa-bind-nodes --numa-bind-cpus --device-ids
--tensor-parallel-size|-tp --decode-context-parallel-size|-dcp --dcp-comm-backend
--dcp-q-replicate|--no-dcp-q-replicate --dcp-kv-cache-interleave-size
--cp-kv-cache-interleave-size --prefill-context-parallel-size|-pcp --data-parallel-size|-dp
--data-parallel-rank|-dpn --data-parallel-start-rank|-dpr --data-parallel-size-local|-dpl
--data-parallel-address|-dpa --data-parallel-rpc-port|-dpp --data-parallel-backend|-dpb
--data-parallel-hybrid-lb|-dph|--no-data-parallel-hybrid-lb
--data-parallel-external-lb|-dpe|--no-data-parallel-external-lb
--data-parallel-multi-port-external-lb|-dpm --enable-hc-sp|--no-enable-hc-sp
--enable-expert-parallel|-ep|--no-enable-expert-parallel
--enable-batch-sharded-sampling|--no-enable-batch-sharded-sampling
--enable-ep-weight-filter|--no-enable-ep-weight-filter --all2all-backend
--enable-dbo|--no-enable-dbo --enable-shm-tensor-arena|--no-enable-shm-tensor-arena
--ubatch-size --enable-elastic-ep|--no-enable-elastic-ep --elastic-ep-max-dp-size
--dbo-decode-token-threshold --dp-sync-interval --dbo-prefill-token-threshold
--disable-nccl-for-dp-synchronization|--no-disable-nccl-for-dp-synchronization
--enable-eplb|--no-enable-eplb --eplb-config --expert-placement-strategy
--max-parallel-loading-workers --ray-workers-use-nsight|--no-ray-workers-use-nsight
--disable-custom-all-reduce|--no-disable-custom-all-reduce --worker-cls
--worker-extension-cls --enable-fault-tolerance|--no-enable-fault-tolerance
--fault-tolerance-config --block-size --gpu-memory-utilization|--device-memory-utilization
--kv-cache-memory-bytes --kv-cache-dtype --num-gpu-blocks-override --enable-prefix-caching
--prefix-caching-hash-algo --prefix-cache-retention-interval --kv-cache-dtype-skip-layers
--kv-sharing-fast-prefill|--no-kv-sharing-fast-prefill
--swa-bounded-replay|--no-swa-bounded-replay --mamba-cache-dtype --mamba-ssm-cache-dtype
--mamba-block-size --prefix-match-unit --mamba-cache-mode
--enable-mamba-shared-prefix-checkpoint|--no-enable-mamba-shared-prefix-checkpoint
--replayssm-buffer-len --use-replayssm|--no-use-replayssm --kv-offloading-size
--kv-offloading-backend --offload-backend --cpu-offload-gb --cpu-offload-params
--offload-group-size --offload-num-in-group --offload-prefetch-step --offload-params
--language-model-only|--no-language-model-only --limit-mm-per-prompt
--enable-mm-embeds|--no-enable-mm-embeds --media-io-kwargs --mm-processor-kwargs
--mm-processor-cache-gb --mm-processor-cache-type --mm-hasher-algorithm
--mm-shm-cache-max-object-size-mb --mm-encoder-only|--no-mm-encoder-only
--mm-encoder-tp-mode --mm-encoder-attn-backend --mm-encoder-attn-dtype
--mm-encoder-fp8-scale-path --mm-encoder-fp8-scale-save-path
--mm-encoder-fp8-scale-save-margin --interleave-mm-strings|--no-interleave-mm-strings
--skip-mm-profiling|--no-skip-mm-profiling --video-pruning-rate --video-pruning-method
--mm-tensor-ipc --mm-processor-device --mm-ipc-gpu-memory-gb --mm-device-do-normalize
--enable-lora|--no-enable-lora --max-loras --max-lora-rank --lora-dtype
--enable-tower-connector-lora|--no-enable-tower-connector-lora --max-cpu-loras
--fully-sharded-loras|--no-fully-sharded-loras --lora-target-modules --default-mm-loras
--specialize-active-lora|--no-specialize-active-lora
--enable-mixed-moe-lora-format|--no-enable-mixed-moe-lora-format
--enable-moe-shared-loras|--no-enable-moe-shared-loras --max-lora-cls-labels
--logging-config --log-level --log-config-file --show-hidden-metrics-for-version
--otlp-traces-endpoint --collect-detailed-traces --per-request-spec-decode-metrics
--kv-cache-metrics|--no-kv-cache-metrics --kv-cache-metrics-sample
--custom-histogram-buckets --cudagraph-metrics|--no-cudagraph-metrics
--enable-layerwise-nvtx-tracing|--no-enable-layerwise-nvtx-tracing
--enable-mfu-metrics|--no-enable-mfu-metrics
--enable-logging-iteration-details|--no-enable-logging-iteration-details --jit-monitor-mode
--jit-monitor-verbose|--no-jit-monitor-verbose --max-num-batched-tokens
--max-num-scheduled-tokens --max-num-seqs --max-num-active-seqs --max-num-queued-reqs
--max-num-queued-tokens --long-prefill-token-threshold
--long-prefill-token-threshold-adaptive|--no-long-prefill-token-threshold-adaptive
--scheduling-policy --enable-chunked-prefill
--disable-chunked-mm-input|--no-disable-chunked-mm-input --scheduler-cls
--scheduler-reserve-full-isl|--no-scheduler-reserve-full-isl --watermark
--prefill-schedule-interval
--disable-hybrid-kv-cache-manager|--no-disable-hybrid-kv-cache-manager
--async-scheduling|--no-async-scheduling --stream-interval --cudagraph-capture-sizes
--max-cudagraph-capture-size --ir-op-priority
--enable-flashinfer-autotune|--no-enable-flashinfer-autotune --monokernel|--no-monokernel
--moe-backend --linear-backend --sparse-indexer-topk-backend --speculative-config|-sc
--spec-method --spec-model --spec-tokens --watermark-config --diffusion-config|-dc
--kv-transfer-config --kv-events-config --ec-transfer-config --ec-manager-config
--compilation-config|-cc --attention-config|-ac --engram-config --reasoning-config
--kernel-config --additional-config --structured-outputs-config --aux-output-config
--profiler-config --watchdog-config --optimization-level --performance-mode
--weight-transfer-config --disable-log-stats --aggregate-engine-logging
--fail-on-environ-validation|--no-fail-on-environ-validation --shutdown-timeout
--gdn-prefill-backend --kda-prefill-backend --kda-decode-backend
--enable-log-requests|--no-enable-log-requests --model --headless --api-server-count|-asc
--config --grpc --lora-modules --chat-template --chat-template-content-format
--trust-request-chat-template|--no-trust-request-chat-template
--trust-request-mm-kwargs|--no-trust-request-mm-kwargs --default-chat-template-kwargs
--reasoning-effort-map --response-role
--return-tokens-as-token-ids|--no-return-tokens-as-token-ids
--enable-auto-tool-choice|--no-enable-auto-tool-choice
--exclude-tools-when-tool-choice-none|--no-exclude-tools-when-tool-choice-none
--tool-call-parser --tool-parser-plugin --tool-strict-level --tool-server --max-log-len
--enable-prompt-tokens-details|--no-enable-prompt-tokens-details
--enable-per-request-metrics|--no-enable-per-request-metrics
--enable-server-load-tracking|--no-enable-server-load-tracking
--enable-force-include-usage|--no-enable-force-include-usage --sse-keep-alive-interval
--enable-tokenizer-info-endpoint|--no-enable-tokenizer-info-endpoint
--enable-log-outputs|--no-enable-log-outputs --enable-log-deltas|--no-enable-log-deltas
--cohere-is-reasoning-model|--no-cohere-is-reasoning-model --cohere-format
--anthropic-disabled-thinking-effort --log-error-stack|--no-log-error-stack
--tokens-only|--no-tokens-only --enable-scale-out|--no-enable-scale-out --fingerprint-mode
--fingerprint-value --host --port --grpc-port --data-parallel-supervisor-port
--dp-supervisor-probe-interval-s --dp-supervisor-probe-timeout-s
--dp-supervisor-probe-failure-threshold --uds --uvicorn-log-level
--disable-uvicorn-access-log|--no-disable-uvicorn-access-log
--disable-access-log-for-endpoints --allow-credentials|--no-allow-credentials
--allowed-origins --allowed-methods --allowed-headers --api-key --ssl-keyfile --ssl-certfile
--ssl-ca-certs --enable-ssl-refresh|--no-enable-ssl-refresh --ssl-cert-reqs --ssl-ciphers
--root-path --middleware --enable-request-id-headers|--no-enable-request-id-headers
--disable-fastapi-docs|--no-disable-fastapi-docs --h11-max-incomplete-event-size
--h11-max-header-count --enable-offline-docs|--no-enable-offline-docs
--enable-flash-late-interaction|--no-enable-flash-late-interaction
"""

# release → its option strings.
RELEASES: tuple[tuple[str, str], ...] = (
    ("0.10.2", _V0_10_2),
    (
        "0.11.0",
        changed(
            _V0_10_2,
            """
drop --max-seq-len-to-capture --disable-async-output-proc --guided-decoding-backend
--guided-decoding-disable-fallback|--no-guided-decoding-disable-fallback
--guided-decoding-disable-any-whitespace|--no-guided-decoding-disable-any-whitespace
--guided-decoding-disable-additional-properties|--no-guided-decoding-disable-additional-properties
--scheduler-delay-factor --preemption-mode
after --allowed-local-media-path --allowed-media-domains
after --hf-overrides --pooler-config
after --enable-expert-parallel|--no-enable-expert-parallel --enable-dbo|--no-enable-dbo
    --dbo-decode-token-threshold --dbo-prefill-token-threshold
after --eplb-config --expert-placement-strategy
after --disable-mm-preprocessor-cache --mm-processor-cache-type
    --mm-shm-cache-max-object-size-mb
after --skip-mm-profiling|--no-skip-mm-profiling --video-pruning-rate
after --additional-config --structured-outputs-config
after --chat-template-content-format
    --trust-request-chat-template|--no-trust-request-chat-template
""",
        ),
    ),
    ("0.33.0", _V0_33_0),
    (
        "0.34.0",
        changed(
            _V0_33_0,
            """
after --enable-nccl-comm-suspend|--no-enable-nccl-comm-suspend
    --checkpoint-prepare-on-startup|--no-checkpoint-prepare-on-startup
after --pt-load-map-location --shuffle-safetensors-files|--no-shuffle-safetensors-files
after --kv-cache-memory-bytes --enable-extensible-kv-cache|--no-enable-extensible-kv-cache
after --max-num-active-seqs --max-num-inflight-kv-loads
after --prefill-schedule-interval --cache-aware-admission-window
    --cache-aware-admission-threshold
after --headless --headless-client-handshake-address
""",
        ),
    ),
)
