// The voice page's hands-free mode: the microphone streams to the Realtime WebSocket
// (`/v1/realtime`), the server's VAD says where turns start and end, replies play as their audio
// deltas arrive, and talking over a reply stops it and tells the server how much of it was heard
// (`conversation.item.truncate`), so the conversation the server keeps is the one the user had.
// Push-to-talk is the inline script in index.html; the mode switch shows one or the other.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  // The socket's audio, both ways: PCM16 mono at 24 kHz.
  const RATE = 24000;
  // Microphone audio per `input_audio_buffer.append`: small enough that the server's VAD hears
  // a turn end within a tenth of a second, large enough to keep the events few.
  const CHUNK_SAMPLES = RATE / 10;
  // How far ahead of the audio clock a reply chunk that arrives after an underrun is scheduled,
  // so that its start is never in the past by the time the audio thread sees it.
  const LEAD_S = 0.05;
  const num = (name, fallback) => (params.has(name) ? Number(params.get(name)) : fallback);
  const vadSettings = {
    type: "server_vad",
    threshold: num("vad_threshold", 0.5),
    prefix_padding_ms: num("prefix_ms", 300),
    silence_duration_ms: num("silence_ms", 500),
  };

  // What the page did, for people and for tests: one entry per response, the events both ways
  // (audio appends left out), the truncations sent, the errors the server answered.
  const hf = {
    state: "off",
    appended_ms: 0,
    turns: [],
    events: [],
    truncates: [],
    errors: [],
  };
  window.handsfree = hf;
  const MAX_EVENTS = 5000;
  let live = null;

  // ---- the mode switch ----
  function setMode(m) {
    document.body.dataset.mode = m;
    $("ptt").hidden = m !== "ptt";
    $("handsfree").hidden = m !== "handsfree";
    for (const r of document.querySelectorAll("input[name=mode]")) r.checked = r.value === m;
    if (m !== "handsfree") stop();
  }
  for (const r of document.querySelectorAll("input[name=mode]")) {
    r.addEventListener("change", () => setMode(r.value));
  }
  setMode(params.get("mode") === "handsfree" ? "handsfree" : "ptt");
  if (params.has("aec")) $("hf-aec").checked = params.get("aec") !== "0";

  // ---- microphone to 24 kHz PCM16 ----
  // A streaming linear-interpolation resampler that hands out fixed-size PCM16 chunks. No
  // low-pass before it: speech has next to no energy near the 12 kHz it folds at. A class so
  // that its source text can go into the AudioWorklet as well as run here (ScriptProcessor).
  class MicTo24k {
    constructor(inRate, chunk) {
      this.step = inRate / 24000;
      // Where the next output sample lies, in input samples from the block's start; -1..0 is
      // between the previous block's last sample and this block's first.
      this.t = 0;
      this.prev = 0;
      this.chunk = chunk;
      this.out = new Int16Array(chunk);
      this.n = 0;
    }
    push(x, emit) {
      let t = this.t;
      while (t < x.length - 1) {
        const i = Math.floor(t);
        const f = t - i;
        const a = i < 0 ? this.prev : x[i];
        const v = Math.max(-1, Math.min(1, a + (x[i + 1] - a) * f));
        this.out[this.n++] = v < 0 ? v * 32768 : v * 32767;
        if (this.n === this.chunk) {
          emit(this.out);
          this.out = new Int16Array(this.chunk);
          this.n = 0;
        }
        t += this.step;
      }
      if (x.length) {
        this.t = t - x.length;
        this.prev = x[x.length - 1];
      }
    }
  }
  const workletSource = MicTo24k.toString() + `
registerProcessor("mic-to-24k", class extends AudioWorkletProcessor {
  constructor(o) { super(); this.r = new MicTo24k(sampleRate, o.processorOptions.chunk); }
  process(inputs) {
    const ch = inputs[0] && inputs[0][0];
    if (ch) this.r.push(ch, (pcm) => this.port.postMessage(pcm, [pcm.buffer]));
    return true;
  }
});`;

  // The microphone's chunks go to `onChunk`; an AudioWorklet where there is one, else a
  // ScriptProcessor (deprecated, but the only way in older browsers).
  async function openMic(s, onChunk) {
    const c = s.ctx;
    const src = c.createMediaStreamSource(s.stream);
    if (c.audioWorklet && !params.has("script_processor")) {
      const url = URL.createObjectURL(new Blob([workletSource], { type: "text/javascript" }));
      await c.audioWorklet.addModule(url);
      URL.revokeObjectURL(url);
      const node = new AudioWorkletNode(c, "mic-to-24k", {
        numberOfInputs: 1, numberOfOutputs: 0, processorOptions: { chunk: CHUNK_SAMPLES },
      });
      node.port.onmessage = (m) => onChunk(m.data);
      src.connect(node);
      hf.capture = "audioworklet";
      return [src, node];
    }
    const r = new MicTo24k(c.sampleRate, CHUNK_SAMPLES);
    const node = c.createScriptProcessor(4096, 1, 1);
    node.onaudioprocess = (ev) => r.push(ev.inputBuffer.getChannelData(0), (pcm) => onChunk(pcm));
    src.connect(node);
    // A processor only runs while connected to the destination; it writes silence.
    node.connect(c.destination);
    hf.capture = "scriptprocessor";
    return [src, node];
  }

  // ---- base64 ----
  function b64(bytes) {
    let s = "";
    for (let i = 0; i < bytes.length; i += 0x8000) {
      s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(s);
  }
  // Base64 PCM16 little-endian -> Float32 samples.
  function pcmFromB64(s) {
    const bin = atob(s);
    const n = bin.length >> 1;
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      let v = bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8);
      if (v >= 0x8000) v -= 0x10000;
      out[i] = v / 32768;
    }
    return out;
  }
  function pcmToB64(pcm) {
    const bytes = new Uint8Array(pcm.length * 2);
    const v = new DataView(bytes.buffer);
    for (let i = 0; i < pcm.length; i++) v.setInt16(2 * i, pcm[i], true);
    return b64(bytes);
  }

  // ---- the socket ----
  function log(dir, type, extra) {
    if (hf.events.length >= MAX_EVENTS) return;
    const e = { t_ms: live ? Math.round(performance.now() - live.t0) : null, dir, type };
    hf.events.push(extra ? Object.assign(e, extra) : e);
  }
  function send(s, ev) {
    if (s.ws.readyState !== WebSocket.OPEN) return;
    s.ws.send(JSON.stringify(ev));
    if (ev.type !== "input_audio_buffer.append") log("out", ev.type);
  }
  function sessionUpdate() {
    return {
      type: "session.update",
      session: {
        type: "realtime",
        max_output_tokens: Number($("max_tokens").value) || "inf",
        audio: {
          input: { format: { type: "audio/pcm", rate: RATE }, turn_detection: vadSettings },
          output: { format: { type: "audio/pcm", rate: RATE } },
        },
      },
    };
  }

  async function start() {
    if (live) return;
    const s = {
      t0: performance.now(),
      ctx: new (window.AudioContext || window.webkitAudioContext)(),
      ready: false,
      pending: [],
      userSpeaking: false,
      // Set when a turn ended and its response has not finished.
      awaiting: false,
      playAt: 0,
      byItem: new Map(),
      byResponse: new Map(),
      nodes: [],
    };
    live = s;
    hf.turns.length = 0;
    hf.events.length = 0;
    hf.truncates.length = 0;
    hf.errors.length = 0;
    hf.appended_ms = 0;
    $("hf-turns").textContent = "";
    $("hf-start").disabled = true;
    $("hf-stop").disabled = false;
    setState("connecting");
    if (s.ctx.state === "suspended") s.ctx.resume();
    const aec = $("hf-aec").checked;
    try {
      s.stream = await navigator.mediaDevices.getUserMedia({
        audio: { channelCount: 1, echoCancellation: aec, noiseSuppression: aec, autoGainControl: aec },
      });
      if (live !== s) return;
      s.nodes = await openMic(s, (pcm) => onMic(s, pcm));
    } catch (e) {
      failed(s, "no microphone: " + (e.message || e));
      return;
    }
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const model = encodeURIComponent($("model").value);
    s.ws = new WebSocket(`${proto}//${location.host}/v1/realtime?model=${model}`);
    s.ws.onopen = () => send(s, sessionUpdate());
    s.ws.onmessage = (m) => {
      if (live !== s) return;
      try {
        onEvent(s, JSON.parse(m.data));
      } catch (e) {
        hf.errors.push({ code: "page", message: String(e.message || e) });
      }
      updateState(s);
    };
    s.ws.onclose = (e) => {
      if (live === s) failed(s, "the socket closed (" + e.code + (e.reason ? ": " + e.reason : "") + ")");
    };
    s.timer = setInterval(() => updateState(s), 100);
  }

  function stop() {
    const s = live;
    if (!s) return;
    live = null;
    clearInterval(s.timer);
    for (const n of s.nodes) n.disconnect();
    if (s.stream) s.stream.getTracks().forEach((t) => t.stop());
    if (s.ws) s.ws.close();
    s.ctx.close();
    $("hf-start").disabled = false;
    $("hf-stop").disabled = true;
    setState("off");
  }

  function failed(s, message) {
    hf.errors.push({ code: "page", message });
    stop();
    setState("error: " + message);
  }

  // A microphone chunk: held until the session is set up (so the server's VAD hears the
  // audio from the start), then appended.
  function onMic(s, pcm) {
    if (live !== s) return;
    if (!s.ready) s.pending.push(pcm);
    else append(s, pcm);
  }
  function append(s, pcm) {
    send(s, { type: "input_audio_buffer.append", audio: pcmToB64(pcm) });
    hf.appended_ms += (pcm.length * 1000) / RATE;
  }

  function onEvent(s, ev) {
    const type = ev.type || "";
    if (type.endsWith(".delta")) {
      log("in", type, { item_id: ev.item_id });
    } else if (type === "response.done") {
      const d = ev.response.status_details;
      log("in", type, { response_id: ev.response.id, status: ev.response.status, reason: d && d.reason });
    } else if (type === "error") {
      log("in", type, { code: ev.error && ev.error.code });
    } else {
      log("in", type);
    }
    switch (type) {
      case "session.updated":
        if (!s.ready) {
          s.ready = true;
          for (const c of s.pending.splice(0)) onMic(s, c);
        }
        break;
      case "error": {
        const e = ev.error || {};
        if (!s.ready) {
          // The session update itself was refused (a server without VAD, a bad setting).
          failed(s, "the server refused the session: " + (e.message || e.code));
          break;
        }
        hf.errors.push({ code: e.code || null, message: e.message || "", event_id: e.event_id || null });
        showError(e.message || e.code || "error");
        break;
      }
      case "input_audio_buffer.speech_started":
        onSpeechStarted(s, ev.item_id);
        break;
      case "input_audio_buffer.speech_stopped":
        s.userSpeaking = false;
        s.awaiting = true;
        s.turnEndAt = performance.now();
        break;
      case "response.created": {
        const t = newTurn(s, ev.response.id);
        t.turn_end_ms = s.turnEndAt != null ? Math.round(s.turnEndAt - s.t0) : null;
        break;
      }
      case "response.output_item.added": {
        const t = s.byResponse.get(ev.response_id);
        if (t && ev.item) {
          t.item_id = ev.item.id;
          s.byItem.set(t.item_id, t);
        }
        break;
      }
      case "response.output_audio.delta":
        onAudio(s, ev);
        break;
      case "response.output_audio_transcript.delta": {
        const t = s.byItem.get(ev.item_id);
        if (t && !t.interrupted) {
          t.transcript += ev.delta;
          t._el.querySelector(".a").textContent = t.transcript;
        }
        break;
      }
      case "response.done":
        onDone(s, ev.response);
        break;
      case "conversation.item.truncated": {
        const t = s.byItem.get(ev.item_id);
        if (t) t.truncate_acked_ms = ev.audio_end_ms;
        break;
      }
      default:
        break;
    }
  }

  function newTurn(s, responseId) {
    const t = {
      n: hf.turns.length + 1,
      response_id: responseId,
      item_id: null,
      turn_end_ms: null,
      first_delta_ms: null,
      audio_ms_received: 0,
      audio_ms_played: 0,
      transcript: "",
      status: "in_progress",
      server_audio_ms: null,
      interrupted: false,
      truncated_at_ms: null,
      truncate_sent: false,
      truncate_acked_ms: null,
    };
    // The scheduled chunks and the page elements stay out of the figures' JSON.
    Object.defineProperty(t, "_chunks", { value: [], enumerable: false });
    const el = document.createElement("div");
    el.className = "turn";
    el.innerHTML = '<div class="q"></div><div class="a"></div><div class="fig"></div><div class="cut"></div>';
    el.querySelector(".q").textContent = "Reply " + t.n;
    $("hf-turns").appendChild(el);
    Object.defineProperty(t, "_el", { value: el, enumerable: false });
    hf.turns.push(t);
    s.byResponse.set(responseId, t);
    return t;
  }

  // The audio clock's time of what the listener hears now: the output's own timestamp where
  // the browser gives one (it trails `currentTime` by the output latency).
  function heardTime(c) {
    const ts = c.getOutputTimestamp ? c.getOutputTimestamp() : null;
    return ts && ts.contextTime > 0 ? Math.min(ts.contextTime, c.currentTime) : c.currentTime;
  }
  function playedMs(t, now) {
    let ms = 0;
    for (const c of t._chunks) ms += Math.max(0, Math.min(c.dur, now - c.start)) * 1000;
    return ms;
  }

  function onAudio(s, ev) {
    const t = s.byItem.get(ev.item_id);
    if (!t) return;
    const samples = pcmFromB64(ev.delta);
    if (!samples.length) return;
    if (t.first_delta_ms == null) {
      const from = t.turn_end_ms != null ? t.turn_end_ms : 0;
      t.first_delta_ms = Math.round(performance.now() - s.t0 - from);
    }
    // Counted even after an interruption (what was on the way when the server stopped), so
    // it is what the server sent; none of it plays.
    t.audio_ms_received += (samples.length * 1000) / RATE;
    if (t.interrupted) return;
    const c = s.ctx;
    const buf = c.createBuffer(1, samples.length, RATE);
    buf.getChannelData(0).set(samples);
    const src = c.createBufferSource();
    src.buffer = buf;
    src.connect(c.destination);
    const start = Math.max(s.playAt, c.currentTime + LEAD_S);
    src.start(start);
    s.playAt = start + buf.duration;
    t._chunks.push({ src, start, dur: buf.duration });
  }

  // The user started talking: a reply that is playing (or still coming) stops at once, its
  // queued audio is dropped, and the server learns how much of it was heard.
  function onSpeechStarted(s, itemId) {
    s.userSpeaking = true;
    s.speechItem = itemId;
    const now = heardTime(s.ctx);
    for (const t of hf.turns) {
      if (t.interrupted) continue;
      const ahead = t._chunks.some((c) => c.start + c.dur > now);
      if (t.status !== "in_progress" && !ahead) continue;
      interrupt(s, t, now);
    }
  }

  function interrupt(s, t, now) {
    const played = playedMs(t, now);
    for (const c of t._chunks) {
      try {
        c.src.stop();
      } catch (_) {
        // already stopped
      }
      c.src.disconnect();
    }
    s.playAt = 0;
    t.interrupted = true;
    t.audio_ms_played = played;
    t.truncated_at_ms = Math.floor(played);
    t._el.querySelector(".cut").textContent =
      "interrupted after " + (played / 1000).toFixed(2) + " s of " +
      (t.audio_ms_received / 1000).toFixed(2) + " s received";
    // why at once: the server's VAD heard the same speech and cancelled the response before
    // it sent speech_started; the server applies a cut of a cancelled reply when it ends.
    sendTruncate(s, t);
  }

  function sendTruncate(s, t) {
    if (t.truncate_sent || !t.item_id || t.audio_ms_received === 0) return;
    t.truncate_sent = true;
    send(s, {
      type: "conversation.item.truncate",
      item_id: t.item_id,
      content_index: 0,
      audio_end_ms: t.truncated_at_ms,
    });
    hf.truncates.push({
      item_id: t.item_id,
      audio_end_ms: t.truncated_at_ms,
      audio_ms_received: t.audio_ms_received,
    });
  }

  function onDone(s, r) {
    const t = s.byResponse.get(r.id);
    s.awaiting = false;
    if (t) {
      t.status = r.status;
      const f = r.lfm2_audio || {};
      t.server_audio_ms = f.audio_ms ?? null;
      if (t.interrupted) sendTruncate(s, t);
      const fig = t._el.querySelector(".fig");
      fig.textContent =
        r.status + " · first audio " + (t.first_delta_ms == null ? "–" : t.first_delta_ms + " ms") +
        " after the turn ended · " + (t.audio_ms_received / 1000).toFixed(2) + " s audio";
    }
  }

  function showError(message) {
    const el = document.createElement("div");
    el.className = "turn err";
    el.textContent = "error: " + message;
    $("hf-turns").appendChild(el);
  }

  // ---- state ----
  function setState(st) {
    hf.state = st;
    const el = $("hf-state");
    el.textContent = st;
    el.dataset.state = st;
  }
  function updateState(s) {
    if (live !== s) return;
    const now = heardTime(s.ctx);
    for (const t of hf.turns) if (!t.interrupted) t.audio_ms_played = playedMs(t, now);
    let st = "listening";
    if (!s.ready) st = "connecting";
    else if (s.userSpeaking) st = "user speaking";
    else if (s.playAt > now) st = "speaking";
    else if (s.awaiting) st = "thinking";
    if (st !== hf.state) setState(st);
  }

  // The reply length applies from the next response on, while the socket is open too.
  $("max_tokens").addEventListener("change", () => {
    const s = live;
    if (s && s.ready) {
      send(s, {
        type: "session.update",
        session: { type: "realtime", max_output_tokens: Number($("max_tokens").value) || "inf" },
      });
    }
  });
  $("hf-start").addEventListener("click", () => start());
  $("hf-stop").addEventListener("click", () => stop());
  // Test hook: start without a click (the test's browser allows audio without a gesture).
  window.handsfreeTest = { start, stop };
})();
