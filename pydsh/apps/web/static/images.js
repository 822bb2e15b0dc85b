// Images of prompts: the composer's tray (paste, an upload button, thumbnails with a remove button) and the
// thumbnails of a sent message, fetched from the attachment store by content id.

import { h, icon, replace } from "./dom.js";

const TYPES = ["image/png", "image/jpeg", "image/webp", "image/gif"];
const MAX_IMAGES = 20;
const MAX_SIDE = 2048;
/** Bytes an image may keep as it is: the request body is capped at 2 MB, and base64 adds a third. */
const BUDGET = 1200 * 1024;

/** The images waiting in the composer, shown as removable thumbnails above the text. */
export class ImageTray {
  /** @param {(message: string | null) => void} report says why an image was not added (null clears it) */
  constructor(report) {
    this.report = report;
    /** @type {{data: string, mimeType: string, url: string, name: string}[]} */
    this.items = [];
    this.el = h("div", { class: "image-chips", role: "list", "aria-label": "Attached images", hidden: true });
    this.input = h("input", { type: "file", accept: TYPES.join(","), multiple: true, hidden: true, "aria-hidden": "true", tabindex: "-1" });
    this.input.addEventListener("change", () => this.addFiles([...(this.input.files || [])]).finally(() => { this.input.value = ""; }));
    this.button = h("button", { type: "button", class: "icon-btn attach-btn", "aria-label": "Attach images", title: "Attach images (or paste one)" }, icon("plus"));
    this.button.addEventListener("click", () => this.input.click());
    this.controls = h("span", { class: "attach-wrap" }, this.button, this.input);
  }

  /** Take the images of a paste; text in the same paste still goes to the box. */
  paste(event) {
    const files = [...(event.clipboardData?.items || [])].filter((i) => i.kind === "file" && i.type.startsWith("image/")).map((i) => i.getAsFile()).filter(Boolean);
    if (!files.length) return;
    if (!event.clipboardData.types.includes("text/plain")) event.preventDefault();
    this.addFiles(files);
  }

  async addFiles(files) {
    for (const file of files) {
      if (this.items.length >= MAX_IMAGES) return this.report(`A prompt may carry at most ${MAX_IMAGES} images.`);
      try {
        this.items.push(await prepared(file, this.items.length + 1));
        this.report(null);
      } catch (err) {
        this.report(`Could not attach ${file.name || "the image"}: ${err.message}`);
      }
    }
    this.render();
  }

  /** The images as the prompt body carries them. */
  blocks() {
    return this.items.map(({ data, mimeType }) => ({ type: "image", data, mimeType }));
  }

  clear() {
    this.items = [];
    this.render();
  }

  render() {
    replace(
      this.el,
      this.items.map((item, index) => {
        const remove = h("button", { type: "button", class: "icon-btn", "aria-label": `Remove ${item.name}` }, icon("close"));
        remove.addEventListener("click", () => {
          this.items.splice(index, 1);
          this.render();
          (this.el.querySelector("button") || this.button).focus();
        });
        return h("div", { class: "image-chip", role: "listitem" }, h("img", { src: item.url, alt: item.name, class: "image-thumb" }), remove);
      }),
    );
    this.el.hidden = !this.items.length;
  }
}

/** A file as an image block: as it is when the server takes it, else redrawn smaller (or as PNG/JPEG). */
async function prepared(file, number) {
  const name = file.name && file.name !== "image.png" ? file.name : `Pasted image ${number}`;
  const bitmap = await createImageBitmap(file).catch(() => { throw new Error("it is not an image the browser can read."); });
  const fits = bitmap.width <= MAX_SIDE && bitmap.height <= MAX_SIDE && file.size <= BUDGET;
  const blob = fits && TYPES.includes(file.type) ? file : await redrawn(bitmap);
  bitmap.close();
  const url = await dataUrl(blob);
  return { data: url.slice(url.indexOf(",") + 1), mimeType: blob.type, url, name };
}

/** The bitmap scaled into the limits, as PNG when that fits the budget, else JPEG. */
async function redrawn(bitmap) {
  let scale = Math.min(1, MAX_SIDE / Math.max(bitmap.width, bitmap.height));
  for (;;) {
    const canvas = h("canvas", { width: Math.max(1, Math.round(bitmap.width * scale)), height: Math.max(1, Math.round(bitmap.height * scale)) });
    canvas.getContext("2d").drawImage(bitmap, 0, 0, canvas.width, canvas.height);
    for (const type of ["image/png", "image/jpeg"]) {
      const blob = await new Promise((resolve) => canvas.toBlob(resolve, type, 0.85));
      if (blob && blob.size <= BUDGET) return blob;
    }
    scale /= 2;
  }
}

function dataUrl(blob) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(new Error("it could not be read."));
    reader.readAsDataURL(blob);
  });
}

/** Thumbnails of a sent message's images (null when it has none); each opens the stored copy. */
export function messageImages(content) {
  const images = Array.isArray(content) ? content.filter((b) => b && b.type === "image" && b.attachment?.attachmentId) : [];
  if (!images.length) return null;
  return h(
    "div",
    { class: "message-images" },
    images.map(({ attachment }) => {
      const href = `/api/attachments/${encodeURIComponent(attachment.attachmentId)}`;
      const label = `Image ${attachment.name || ""} ${attachment.width}×${attachment.height}`.replace(/\s+/g, " ");
      return h("a", { href, target: "_blank", rel: "noopener", class: "message-image", "aria-label": `Open ${label}` }, h("img", { src: href, alt: label, loading: "lazy", width: attachment.width, height: attachment.height }));
    }),
  );
}
