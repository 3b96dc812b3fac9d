// The viewer's entry: a hash router between the inventory (#/; #/tree, #/list choose its view), a tensor page
// (#/tensor/{checkpoint}/{name}), diff mode (#/diff/{a}/{b}[/{name}], diff_page.ts) and the Compute panel (#/compute), with every error shown in the banner.
import { api, ApiError } from "./api";
import { renderComputePanel } from "./compute_panel";
import { renderDiffPage } from "./diff_page";
import { clearErrors, el, showError } from "./dom";
import { renderInventory } from "./inventory";
import { indexingPanel } from "./jobs";
import { renderAcquisitionPage } from "./stem/acquisition_page";
import { renderLocalPage } from "./stem/local/local_page";
import { renderTensorPage } from "./tensor_page";
import { gpuColorizer, onAdapterReport } from "./webgpu/colorize";
import { exposeDisplay } from "./webgpu/display";

const root = document.getElementById("app") as HTMLElement;
let route = 0;

async function navigate(): Promise<void> {
  const seq = ++route;
  clearErrors();
  const hash = window.location.hash.replace(/^#\/?/, "");
  const m = /^tensor\/([^/]+)\/(.+)$/.exec(hash);
  const stem = /^acquisition\/([^/]+)$/.exec(hash);
  const diff = /^diff\/([^/]+)\/([^/]+)(?:\/(.+))?$/.exec(hash); // diff mode (diff_page.ts)
  const compute = hash === "compute";
  const local = hash === "local"; // 4D-STEM files from the user's disk, no server (stem/local/local_page.ts)
  document.getElementById("nav-compute")?.classList.toggle("active", compute);
  document.getElementById("nav-tensors")?.classList.toggle("active", !compute && !m && !local);
  document.getElementById("nav-local")?.classList.toggle("active", local);
  try {
    if (local) {
      renderLocalPage(root);
    } else if (compute) {
      document.title = "Compute · Tensormorph";
      await renderComputePanel(root);
    } else if (diff) {
      const tensor = diff[3] === undefined ? undefined : decodeURIComponent(diff[3]);
      document.title = `${tensor ?? "Difference"} · Tensormorph`;
      await renderDiffPage(root, decodeURIComponent(diff[1]), decodeURIComponent(diff[2]), tensor);
    } else if (stem) {
      await renderAcquisitionPage(root, decodeURIComponent(stem[1]));
    } else if (m) {
      const ckpt = decodeURIComponent(m[1]);
      const name = decodeURIComponent(m[2]);
      document.title = `${name} · Tensormorph`;
      await renderTensorPage(root, ckpt, name);
    } else {
      document.title = "Tensormorph";
      await renderInventory(root, hash === "list" || hash === "tree" ? hash : undefined);
    }
  } catch (e) {
    if (seq !== route) return;
    if (m && e instanceof ApiError && e.status === 503 && (await showIndexing(decodeURIComponent(m[1]), seq))) return;
    showError(e, compute ? "cannot list the compute backends" : diff ? "cannot compute the difference" : stem ? "cannot open the acquisition" : m ? "cannot open the tensor" : "cannot list the tensors");
    if (!root.textContent?.trim() || root.querySelector(".status")) {
      root.replaceChildren();
      const p = document.createElement("p");
      p.className = "notice";
      p.innerHTML = 'Nothing to show. <a href="#/">Back to the tensor list</a>.';
      root.append(p);
    }
  }
}

/** A tensor of a checkpoint still being indexed: its progress, then the page again once indexed. */
async function showIndexing(ckpt: string, seq: number): Promise<boolean> {
  const cks = (await api.checkpoints()).checkpoints.filter((c) => c.id === ckpt);
  const panel = indexingPanel(cks, () => {
    if (seq === route) void navigate();
  });
  if (!panel || seq !== route) return false;
  root.replaceChildren(el("p", { class: "notice" }, "This checkpoint is still being indexed; the tensor opens when it is done."), panel);
  return true;
}

window.addEventListener("error", (ev) => showError(ev.error ?? ev.message, "unexpected error"));
window.addEventListener("unhandledrejection", (ev) => showError(ev.reason, "unexpected error"));
window.addEventListener("hashchange", () => void navigate());

api.health().then(
  (h) => {
    const v = document.getElementById("version");
    if (v) v.textContent = `${h.name} ${h.version}`;
  },
  (e) => {
    if (!window.location.hash.startsWith("#/local")) showError(e, "server health"); // the local-files page needs none
  },
);
// WebGPU: ask for the page's adapter once (it logs what it got) and tell the server which one it was, for
// `tensormorph backends`; window.tmDisplay runs the display kernel.
onAdapterReport(({ label: _label, ...report }) => {
  api.putWebgpuAdapter(report).catch((e) => console.warn("webgpu: the adapter report was not kept by the server", e));
});
exposeDisplay();
void gpuColorizer();
void navigate();
