"""SGLang's command-line flags by release, as `python -m sglang.launch_server` parses them.

Data, read from each release's wheel on PyPI: every option string `ServerArgs.add_cli_args`
adds (python/sglang/srt/server_args.py; `prepare_server_args` builds a plain
`argparse.ArgumentParser()` with them), one word per argparse action, its aliases joined by `|`
(`--tensor-parallel-size|--tp-size`), `--no-NAME` beside an `argparse.BooleanOptionalAction`;
argparse adds `-h|--help` itself. SGLang's parser is argparse's own: `--mem_fraction_static` is
not `--mem-fraction-static` there (vLLM's parser turns `_` into `-`, SGLang's does not).
"""

from __future__ import annotations

# release → its option strings, one argparse action a word (aliases joined by `|`).
RELEASES: tuple[tuple[str, str], ...] = (
    (
        "0.4.3.post4",
        """
-h|--help --model-path --tokenizer-path --host --port --tokenizer-mode --skip-tokenizer-init
--load-format --trust-remote-code --dtype --kv-cache-dtype --quantization
--quantization-param-path --context-length --device --served-model-name --chat-template
--is-embedding --revision --mem-fraction-static --max-running-requests --max-total-tokens
--chunked-prefill-size --max-prefill-tokens --schedule-policy --schedule-conservativeness
--cpu-offload-gb --tensor-parallel-size|--tp-size --stream-interval --stream-output
--random-seed --constrained-json-whitespace-pattern --watchdog-timeout --dist-timeout
--download-dir --base-gpu-id --gpu-id-step --log-level --log-level-http --log-requests
--log-requests-level --show-time-cost --enable-metrics --decode-log-interval --api-key
--file-storage-path --enable-cache-report --reasoning-parser --data-parallel-size|--dp-size
--load-balance-method --expert-parallel-size|--ep-size --dist-init-addr|--nccl-init-addr
--nnodes --node-rank --json-model-override-args --lora-paths --max-loras-per-batch
--lora-backend --attention-backend --sampling-backend --grammar-backend
--enable-flashinfer-mla --flashinfer-mla-disable-ragged --speculative-algorithm
--speculative-draft-model-path --speculative-num-steps --speculative-eagle-topk
--speculative-num-draft-tokens --speculative-accept-threshold-single
--speculative-accept-threshold-acc --speculative-token-map --enable-double-sparsity
--ds-channel-config-path --ds-heavy-channel-num --ds-heavy-token-num --ds-heavy-channel-type
--ds-sparse-decode-threshold --disable-radix-cache --disable-cuda-graph
--disable-cuda-graph-padding --enable-nccl-nvls --disable-outlines-disk-cache
--disable-custom-all-reduce --disable-mla --disable-overlap-schedule --enable-mixed-chunk
--enable-dp-attention --enable-ep-moe --enable-torch-compile --torch-compile-max-bs
--cuda-graph-max-bs --cuda-graph-bs --torchao-config --enable-nan-detection
--enable-p2p-check --triton-attention-reduce-in-fp32 --triton-attention-num-kv-splits
--num-continuous-decode-steps --delete-ckpt-after-loading --enable-memory-saver
--allow-auto-truncate --enable-custom-logit-processor --tool-call-parser
--enable-hierarchical-cache --warmups --debug-tensor-dump-output-folder
--debug-tensor-dump-input-file --debug-tensor-dump-inject
""",
    ),
    (
        "0.4.10",
        """
-h|--help --model-path|--model --tokenizer-path --tokenizer-mode --skip-tokenizer-init
--load-format --model-loader-extra-config --trust-remote-code --context-length
--is-embedding --enable-multimodal --revision --model-impl --host --port
--skip-server-warmup --warmups --nccl-port --dtype --quantization --quantization-param-path
--kv-cache-dtype --mem-fraction-static --max-running-requests --max-queued-requests
--max-total-tokens --chunked-prefill-size --max-prefill-tokens --schedule-policy
--schedule-conservativeness --cpu-offload-gb --page-size --hybrid-kvcache-ratio
--swa-full-tokens-ratio --disable-hybrid-swa-memory --device
--tensor-parallel-size|--tp-size --pipeline-parallel-size|--pp-size --max-micro-batch-size
--stream-interval --stream-output --random-seed --constrained-json-whitespace-pattern
--watchdog-timeout --dist-timeout --download-dir --base-gpu-id --gpu-id-step --sleep-on-idle
--log-level --log-level-http --log-requests --log-requests-level --crash-dump-folder
--show-time-cost --enable-metrics --enable-metrics-for-all-schedulers
--bucket-time-to-first-token --bucket-inter-token-latency --bucket-e2e-request-latency
--collect-tokens-histogram --decode-log-interval --enable-request-time-stats-logging
--kv-events-config --api-key --served-model-name --chat-template --completion-template
--file-storage-path --enable-cache-report --reasoning-parser --tool-call-parser
--data-parallel-size|--dp-size --load-balance-method --dist-init-addr|--nccl-init-addr
--nnodes --node-rank --json-model-override-args --preferred-sampling-params --enable-lora
--max-lora-rank --lora-target-modules --lora-paths --max-loras-per-batch --lora-backend
--attention-backend --decode-attention-backend --prefill-attention-backend
--sampling-backend --grammar-backend --mm-attention-backend --speculative-algorithm
--speculative-draft-model-path --speculative-num-steps --speculative-eagle-topk
--speculative-num-draft-tokens --speculative-accept-threshold-single
--speculative-accept-threshold-acc --speculative-token-map
--expert-parallel-size|--ep-size|--ep --enable-ep-moe --enable-flashinfer-cutlass-moe
--enable-flashinfer-trtllm-moe --enable-flashinfer-allreduce-fusion --enable-deepep-moe
--deepep-mode --ep-num-redundant-experts --ep-dispatch-algorithm --init-expert-location
--enable-eplb --eplb-algorithm --eplb-rebalance-num-iterations
--eplb-rebalance-layers-per-chunk --expert-distribution-recorder-mode
--expert-distribution-recorder-buffer-size --enable-expert-distribution-metrics
--deepep-config --moe-dense-tp-size --enable-hierarchical-cache --hicache-ratio
--hicache-size --hicache-write-policy --hicache-io-backend --hicache-storage-backend
--enable-double-sparsity --ds-channel-config-path --ds-heavy-channel-num
--ds-heavy-token-num --ds-heavy-channel-type --ds-sparse-decode-threshold
--disable-radix-cache --cuda-graph-max-bs --cuda-graph-bs --disable-cuda-graph
--disable-cuda-graph-padding --enable-profile-cuda-graph --enable-nccl-nvls
--enable-tokenizer-batch-encode --disable-outlines-disk-cache --disable-custom-all-reduce
--enable-mscclpp --disable-overlap-schedule --enable-mixed-chunk --enable-dp-attention
--enable-dp-lm-head --enable-two-batch-overlap --enable-torch-compile --torch-compile-max-bs
--torchao-config --enable-nan-detection --enable-p2p-check --triton-attention-reduce-in-fp32
--triton-attention-num-kv-splits --num-continuous-decode-steps --delete-ckpt-after-loading
--enable-memory-saver --allow-auto-truncate --enable-custom-logit-processor
--flashinfer-mla-disable-ragged --disable-shared-experts-fusion
--disable-chunked-prefix-cache --disable-fast-image-processor --enable-return-hidden-states
--enable-triton-kernel-moe --debug-tensor-dump-output-folder --debug-tensor-dump-input-file
--debug-tensor-dump-inject --debug-tensor-dump-prefill-only --disaggregation-mode
--disaggregation-transfer-backend --disaggregation-bootstrap-port --disaggregation-decode-tp
--disaggregation-decode-dp --disaggregation-prefill-pp --disaggregation-ib-device
--num-reserved-decode-tokens --pdlb-url --custom-weight-loader --enable-pdmux --sm-group-num
--weight-loader-disable-mmap
""",
    ),
    (
        "0.5.8",
        """
-h|--help --model-path|--model --tokenizer-path --tokenizer-mode --tokenizer-worker-num
--skip-tokenizer-init --load-format --model-loader-extra-config --trust-remote-code
--context-length --is-embedding --enable-multimodal --revision --model-impl --host --port
--fastapi-root-path --grpc-mode --skip-server-warmup --warmups --nccl-port
--checkpoint-engine-wait-weights-before-ready --dtype --quantization
--quantization-param-path --kv-cache-dtype --enable-fp32-lm-head --modelopt-quant
--modelopt-checkpoint-restore-path --modelopt-checkpoint-save-path --modelopt-export-path
--quantize-and-serve --rl-quant-profile --mem-fraction-static --max-running-requests
--max-queued-requests --max-total-tokens --chunked-prefill-size --prefill-max-requests
--enable-dynamic-chunking --max-prefill-tokens --schedule-policy
--enable-priority-scheduling --abort-on-priority-when-disabled
--schedule-low-priority-values-first --priority-scheduling-preemption-threshold
--schedule-conservativeness --page-size --hybrid-kvcache-ratio --swa-full-tokens-ratio
--disable-hybrid-swa-memory --radix-eviction-policy --enable-prefill-delayer
--prefill-delayer-max-delay-passes --prefill-delayer-token-usage-low-watermark
--prefill-delayer-forward-passes-buckets --prefill-delayer-wait-seconds-buckets --device
--tensor-parallel-size|--tp-size --pipeline-parallel-size|--pp-size
--pp-max-micro-batch-size --pp-async-batch-depth --stream-interval --stream-output
--random-seed --constrained-json-whitespace-pattern
--constrained-json-disable-any-whitespace --watchdog-timeout --soft-watchdog-timeout
--dist-timeout --download-dir --model-checksum --base-gpu-id --gpu-id-step --sleep-on-idle
--custom-sigquit-handler --log-level --log-level-http --log-requests --log-requests-level
--log-requests-format --log-requests-target --uvicorn-access-log-exclude-prefixes
--crash-dump-folder --show-time-cost --enable-metrics --enable-metrics-for-all-schedulers
--tokenizer-metrics-custom-labels-header --tokenizer-metrics-allowed-custom-labels
--bucket-time-to-first-token --bucket-inter-token-latency --bucket-e2e-request-latency
--collect-tokens-histogram --prompt-tokens-buckets --generation-tokens-buckets
--gc-warning-threshold-secs --decode-log-interval --enable-request-time-stats-logging
--kv-events-config --enable-trace --otlp-traces-endpoint --export-metrics-to-file
--export-metrics-to-file-dir --api-key --admin-api-key --served-model-name --weight-version
--chat-template --hf-chat-template-name --completion-template --file-storage-path
--enable-cache-report --reasoning-parser --tool-call-parser --tool-server
--sampling-defaults --data-parallel-size|--dp-size --load-balance-method
--prefill-round-robin-balance --dist-init-addr|--nccl-init-addr --nnodes --node-rank
--json-model-override-args --preferred-sampling-params --enable-lora
--enable-lora-overlap-loading --max-lora-rank --lora-target-modules --lora-paths
--max-loras-per-batch --max-loaded-loras --lora-eviction-policy --lora-backend
--max-lora-chunk-size --attention-backend --prefill-attention-backend
--decode-attention-backend --sampling-backend --grammar-backend --mm-attention-backend
--nsa-prefill-backend --nsa-decode-backend --fp8-gemm-backend --fp4-gemm-backend
--disable-flashinfer-autotune --speculative-algorithm
--speculative-draft-model-path|--speculative-draft-model --speculative-draft-model-revision
--speculative-draft-load-format --speculative-num-steps --speculative-eagle-topk
--speculative-num-draft-tokens --speculative-accept-threshold-single
--speculative-accept-threshold-acc --speculative-token-map --speculative-attention-mode
--speculative-draft-attention-backend --speculative-moe-runner-backend
--speculative-moe-a2a-backend --speculative-draft-model-quantization
--speculative-ngram-min-match-window-size --speculative-ngram-max-match-window-size
--speculative-ngram-min-bfs-breadth --speculative-ngram-max-bfs-breadth
--speculative-ngram-match-type --speculative-ngram-branch-length
--speculative-ngram-capacity --enable-multi-layer-eagle
--expert-parallel-size|--ep-size|--ep --moe-a2a-backend --moe-runner-backend
--flashinfer-mxfp4-moe-precision --enable-flashinfer-allreduce-fusion --deepep-mode
--ep-num-redundant-experts --ep-dispatch-algorithm --init-expert-location --enable-eplb
--eplb-algorithm --eplb-rebalance-num-iterations --eplb-rebalance-layers-per-chunk
--eplb-min-rebalancing-utilization-threshold --expert-distribution-recorder-mode
--expert-distribution-recorder-buffer-size --enable-expert-distribution-metrics
--deepep-config --moe-dense-tp-size --elastic-ep-backend --mooncake-ib-device
--max-mamba-cache-size --mamba-ssm-dtype --mamba-full-memory-ratio
--mamba-scheduler-strategy --mamba-track-interval --enable-hierarchical-cache
--hicache-ratio --hicache-size --hicache-write-policy --hicache-io-backend
--hicache-mem-layout --disable-hicache-numa-detect --hicache-storage-backend
--hicache-storage-prefetch-policy --hicache-storage-backend-extra-config
--hierarchical-sparse-attention-extra-config --enable-lmcache --kt-weight-path --kt-method
--kt-cpuinfer --kt-threadpool-count --kt-num-gpu-experts --kt-max-deferred-experts-per-token
--dllm-algorithm --dllm-algorithm-config --enable-double-sparsity --ds-channel-config-path
--ds-heavy-channel-num --ds-heavy-token-num --ds-heavy-channel-type
--ds-sparse-decode-threshold --cpu-offload-gb --offload-group-size --offload-num-in-group
--offload-prefetch-step --offload-mode --multi-item-scoring-delimiter --disable-radix-cache
--cuda-graph-max-bs --cuda-graph-bs --disable-cuda-graph --disable-cuda-graph-padding
--enable-profile-cuda-graph --enable-cudagraph-gc --enable-layerwise-nvtx-marker
--enable-nccl-nvls --enable-symm-mem --disable-flashinfer-cutlass-moe-fp4-allgather
--enable-tokenizer-batch-encode --disable-tokenizer-batch-decode
--disable-outlines-disk-cache --disable-custom-all-reduce --enable-mscclpp
--enable-torch-symm-mem --disable-overlap-schedule --enable-mixed-chunk
--enable-dp-attention --enable-dp-lm-head --enable-two-batch-overlap
--enable-single-batch-overlap --tbo-token-distribution-threshold --enable-torch-compile
--enable-torch-compile-debug-mode --enable-piecewise-cuda-graph
--piecewise-cuda-graph-tokens --piecewise-cuda-graph-compiler --torch-compile-max-bs
--piecewise-cuda-graph-max-tokens --torchao-config --enable-nan-detection --enable-p2p-check
--triton-attention-reduce-in-fp32 --triton-attention-num-kv-splits
--triton-attention-split-tile-size --num-continuous-decode-steps --delete-ckpt-after-loading
--enable-memory-saver --enable-weights-cpu-backup --enable-draft-weights-cpu-backup
--allow-auto-truncate --enable-custom-logit-processor --flashinfer-mla-disable-ragged
--disable-shared-experts-fusion --disable-chunked-prefix-cache
--disable-fast-image-processor --keep-mm-feature-on-device --enable-return-hidden-states
--enable-return-routed-experts --scheduler-recv-interval --numa-node
--enable-deterministic-inference --rl-on-policy-target --enable-attn-tp-input-scattered
--enable-nsa-prefill-context-parallel --nsa-prefill-cp-mode --enable-fused-qk-norm-rope
--enable-precise-embedding-interpolation --enable-dynamic-batch-tokenizer
--dynamic-batch-tokenizer-batch-size --dynamic-batch-tokenizer-batch-timeout
--debug-tensor-dump-output-folder --debug-tensor-dump-layers --debug-tensor-dump-input-file
--debug-tensor-dump-inject --disaggregation-mode --disaggregation-transfer-backend
--disaggregation-bootstrap-port --disaggregation-decode-tp --disaggregation-decode-dp
--disaggregation-prefill-pp --disaggregation-ib-device
--disaggregation-decode-enable-offload-kvcache --disaggregation-decode-enable-fake-auto
--num-reserved-decode-tokens --disaggregation-decode-polling-interval --encoder-only
--language-only --encoder-transfer-backend --encoder-urls --custom-weight-loader
--weight-loader-disable-mmap --remote-instance-weight-loader-seed-instance-ip
--remote-instance-weight-loader-seed-instance-service-port
--remote-instance-weight-loader-send-weights-group-ports
--remote-instance-weight-loader-backend
--remote-instance-weight-loader-start-seed-via-transfer-engine --enable-pdmux
--pdmux-config-path --sm-group-num --config --mm-max-concurrent-calls
--mm-per-request-timeout --enable-broadcast-mm-inputs-process --mm-process-config
--mm-enable-dp-encoder --limit-mm-data-per-request --decrypted-config-file
--decrypted-draft-config-file --enable-prefix-mm-cache --forward-hooks
""",
    ),
)
