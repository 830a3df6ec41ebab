// Two models at once in one process, as node-llama-cpp allows (and as
// llama-server holds a draft model beside its target): loads MODEL with
// LAYERS_A GPU layers, then MODEL_B with LAYERS_B, makes a context for
// each (A's first), evaluates 32 tokens in each, then frees them.
// llama.cpp's log goes to stderr, as in run.mjs.
// usage: node run-two.mjs NODE_MODULES MODEL MODEL_B LAYERS_A LAYERS_B CONTEXT
import path from "node:path";
import {pathToFileURL} from "node:url";

const [modules, modelA, modelB, layersA, layersB, context] = process.argv.slice(2);
const {getLlama, LlamaLogLevel} = await import(
    pathToFileURL(path.join(modules, "node-llama-cpp", "dist", "index.js")).href);

let lastLog = performance.now();
const llama = await getLlama({
    gpu: "cuda", build: "never", progressLogs: false, vramPadding: 0, logLevel: LlamaLogLevel.debug,
    logger: (level, message) => {
        lastLog = performance.now();
        process.stderr.write(message.endsWith("\n") ? message : message + "\n");
    },
});
let rc = 0;
try {
    const load = (modelPath, layers) =>
        llama.loadModel({modelPath, useMmap: false, ignoreMemorySafetyChecks: true, gpuLayers: Number(layers)});
    const a = await load(modelA, layersA);
    const b = await load(modelB, layersB);
    const contexts = [];
    for (const model of [a, b])
        contexts.push(await model.createContext({contextSize: Number(context), ignoreMemorySafetyChecks: true}));
    const prompt = Array.from({length: 32}, (_, i) => 3 + i);
    for (const ctx of contexts)
        await ctx.getSequence().evaluateWithoutGeneratingNewTokens(prompt);
    for (const ctx of contexts)
        await ctx.dispose();
    await a.dispose();
    await b.dispose();
    console.log("done");
} catch (e) {
    console.log("failed: " + e.message);
    rc = 3;
}
// The log drains as in run.mjs: until 300 ms pass without a line (5 s at most).
const start = performance.now();
while (performance.now() - lastLog < 300 && performance.now() - start < 5000)
    await new Promise((resolve) => setTimeout(resolve, 50));
await llama.dispose();
process.exit(rc);
