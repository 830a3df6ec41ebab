// Loads a GGUF with node-llama-cpp's prebuilt CUDA llama.cpp and, if asked,
// evaluates 32 tokens once (EVAL 1), or then generates 8 more one at a time
// (EVAL 2: single-token decodes, which ggml runs as CUDA graphs where
// GGML_CUDA_DISABLE_GRAPHS is unset); llama.cpp's own log goes to stderr, the model
// load's wall time to stdout ("load_ms N", for make bench). A load or a
// context that fails is a scenario too: it prints "failed: ..." and exits 3.
// usage: node run.mjs NODE_MODULES MODEL GPU_LAYERS|auto|cpu CONTEXT EVAL(0|1|2) MMAP(0|1)
// "cpu" loads node-llama-cpp's CPU build (no CUDA in the process at all):
// a runner that computes on the CPU, as one whose CUDA backend failed to load.
import path from "node:path";
import {pathToFileURL} from "node:url";

const [modules, modelPath, layers, context, evaluate, mmap] = process.argv.slice(2);
const {getLlama, LlamaLogLevel} = await import(
    pathToFileURL(path.join(modules, "node-llama-cpp", "dist", "index.js")).href);

let lastLog = performance.now();
const llama = await getLlama({
    gpu: layers === "cpu" ? false : "cuda", build: "never", progressLogs: false, vramPadding: 0,
    logLevel: LlamaLogLevel.debug,
    logger: (level, message) => {
        lastLog = performance.now();
        process.stderr.write(message.endsWith("\n") ? message : message + "\n");
    },
});
let rc = 0;
try {
    // Memory checks off where the layers are given: llama.cpp itself must
    // meet the full card. With "auto" node-llama-cpp's own estimate decides
    // (and with the checks off it loads in a simulation mode that hides
    // llama.cpp's log).
    const loadStart = performance.now();
    const model = await llama.loadModel({
        modelPath, useMmap: mmap === "1", ignoreMemorySafetyChecks: layers !== "auto",
        gpuLayers: layers === "auto" ? "auto" : layers === "cpu" ? 0 : Number(layers),
    });
    console.log("load_ms " + (performance.now() - loadStart).toFixed(1));
    const ctx = await model.createContext({contextSize: Number(context), ignoreMemorySafetyChecks: true});
    const prompt = Array.from({length: 32}, (_, i) => 3 + i);
    if (evaluate === "1")
        await ctx.getSequence().evaluateWithoutGeneratingNewTokens(prompt);
    if (evaluate === "2") {
        let generated = 0;
        for await (const token of ctx.getSequence().evaluate(prompt)) {
            void token;
            if (++generated === 8)
                break;
        }
        console.log("generated " + generated);
    }
    await ctx.dispose();
    await model.dispose();
    console.log("done");
} catch (e) {
    console.log("failed: " + e.message);
    rc = 3;
}
// llama.cpp's log reaches JavaScript asynchronously: let it drain, until
// 300 ms pass without a line (5 s at most). A fixed 200 ms lost the
// "CUDA0 model buffer size" line on a loaded machine now and then, and the
// test compared the report with nothing (63-llama-real-next #202).
const drainStart = performance.now();
while (performance.now() - lastLog < 300 && performance.now() - drainStart < 5000)
    await new Promise((resolve) => setTimeout(resolve, 50));
await llama.dispose();
process.exit(rc);
