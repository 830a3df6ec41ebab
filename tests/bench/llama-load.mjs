// Row 5 of `make bench`: one model load by node-llama-cpp's prebuilt CUDA
// llama.cpp, timed inside node. Prints "load_ms WALL cpu_ms CPU": the wall
// time of llama.loadModel and the CPU time the whole process spent during
// it (every thread: node's, llama.cpp's, the shim's writer), so a run on a
// busy machine can be read by the work done as well as by the clock.
// usage: node llama-load.mjs NODE_MODULES MODEL
import path from "node:path";
import {pathToFileURL} from "node:url";

const [modules, modelPath] = process.argv.slice(2);
const {getLlama, LlamaLogLevel} = await import(
    pathToFileURL(path.join(modules, "node-llama-cpp", "dist", "index.js")).href);
const llama = await getLlama({
    gpu: "cuda", build: "never", progressLogs: false, vramPadding: 0, logLevel: LlamaLogLevel.error,
});
const cpuStart = process.cpuUsage();
const wallStart = performance.now();
const model = await llama.loadModel({modelPath, useMmap: false, ignoreMemorySafetyChecks: true, gpuLayers: 99});
const wall = performance.now() - wallStart;
const cpu = process.cpuUsage(cpuStart);
console.log(`load_ms ${wall.toFixed(1)} cpu_ms ${((cpu.user + cpu.system) / 1000).toFixed(1)}`);
await model.dispose();
await llama.dispose();
