//! LFM2-Audio ASR end to end on the tiny synthetic checkpoint, against liquid-audio 1.3.0's
//! outputs on the same weights (`tests/fixtures/lfm2_tiny/reference.safetensors`): the prompt's
//! token ids, the backbone's prefill logits (from liquid-audio's adapter rows and from ours),
//! greedy ASR tokens; quantized packages against F32; and the task's typed errors.

mod common;

use audio_engine::ggml::Backend;
use audio_engine::lfm2_audio::internals::audio::AudioError;
use audio_engine::lfm2_audio::internals::backbone::{Backbone, Position, Rows};
use audio_engine::lfm2_audio::internals::package::ModelPackage;
use audio_engine::lfm2_audio::internals::package::Quant;
use audio_engine::lfm2_audio::internals::prompt::{PromptBuilder, PromptPiece, SYSTEM_ASR};
use audio_engine::lfm2_audio::internals::task_calls::*;
use audio_engine::lfm2_audio::{AsrOptions, EngineError, Lfm2Audio, ModelOptions, StopReason};

use common::lfm2_tiny::{input_signal, reference};
use common::package::{engine, engine_with, package, rel};

/// The ASR prompt as our builder makes it, flattened like the fixture (`None` = audio row).
fn our_prompt(e: &Lfm2Audio, rows: usize) -> Vec<Option<u32>> {
    let mut b = PromptBuilder::new(e.tokenizer());
    b.system(SYSTEM_ASR).audio(rows).assistant_turn();
    b.finish()
        .pieces()
        .iter()
        .flat_map(|p| match p {
            PromptPiece::Text(ids) => ids.iter().copied().map(Some).collect::<Vec<_>>(),
            PromptPiece::Audio { rows, .. } => vec![None; *rows],
            PromptPiece::Frame(_) => unreachable!("an ASR prompt has no frame"),
        })
        .collect()
}

/// Prefill logits of every prompt position with the given audio rows.
fn prefill_logits(ty: Quant, prompt: &[Option<u32>], audio: &[f32]) -> Vec<f32> {
    let pkg = ModelPackage::open_paths(package(ty)).unwrap();
    let be = Backend::cpu().unwrap();
    be.set_n_threads(2).unwrap();
    let h = pkg.backbone.config.hidden_size as usize;
    let bb = Backbone::load(pkg.backbone, &be).unwrap();
    let mut cache = bb.new_cache(prompt.len()).unwrap();
    let mut row = 0;
    let positions: Vec<Position<'_>> = prompt
        .iter()
        .map(|p| match p {
            Some(t) => Position::Text(*t),
            None => {
                row += 1;
                Position::Audio(&audio[(row - 1) * h..row * h])
            }
        })
        .collect();
    bb.forward(&mut cache, &positions, Rows::All, true)
        .unwrap()
        .logits
        .unwrap()
}

#[test]
fn prompt_prefill_and_greedy_tokens_match_liquid_audio() {
    let r = reference();
    let e = engine(Quant::F32);
    let want_prompt = r.prompt("asr");
    let rows = want_prompt.iter().filter(|p| p.is_none()).count();
    assert_eq!(our_prompt(&e, rows), want_prompt, "prompt token ids");

    // Backbone alone: liquid-audio's adapter rows in, logits at every position out.
    let want = r.f32("asr_prefill_logits");
    let got = prefill_logits(Quant::F32, &want_prompt, &r.f32("adapter_out"));
    let e_bb = rel(&got, &want);
    // End to end: our features, encoder and adapter.
    let (n, ours) = e.encode_audio(&input_signal()).unwrap();
    assert_eq!(n, rows);
    let e_adapter = rel(&ours, &r.f32("adapter_out"));
    let got2 = prefill_logits(Quant::F32, &want_prompt, &ours);
    let e_all = rel(&got2, &want);
    println!(
        "prefill logits vs liquid-audio: backbone {e_bb:.2e}, end to end {e_all:.2e} \
         (adapter {e_adapter:.2e})"
    );
    assert!(e_bb < 1e-3, "backbone logits {e_bb}");
    assert!(e_all < 1e-3, "end-to-end logits {e_all}");

    // Greedy ASR: the same tokens, stopping where liquid-audio stopped.
    let want_tokens = r.asr_tokens();
    let opts = AsrOptions {
        max_new_tokens: want_tokens.len(),
        ..Default::default()
    };
    let got = e.asr(&input_signal(), &opts).unwrap();
    assert_eq!(got.tokens, want_tokens);
    assert_eq!(r.meta("asr_stop"), "max_steps");
    assert_eq!(got.stop, StopReason::MaxTokens);
    assert_eq!(got.prompt_positions, want_prompt.len());
    // Deterministic: a second run gives the same bytes.
    let again = e.asr(&input_signal(), &opts).unwrap();
    assert_eq!(again.tokens, got.tokens);
    assert_eq!(again.text, got.text);
}

#[test]
fn quantized_packages_stay_close_to_f32() {
    let r = reference();
    let prompt = r.prompt("asr");
    let audio = r.f32("adapter_out");
    let f32_logits = prefill_logits(Quant::F32, &prompt, &audio);
    // Bounds: measured on this checkpoint 2.1e-3 (F16), 4.7e-2 (Q8_0), 4.0e-1 (Q4_0) of the
    // largest logit, with ~2x headroom. The tiny model amplifies weight rounding about 4x (F16
    // rounds weights by <= 4.9e-4 relative); Q8_0 also quantizes the activations, and Q4_0's
    // 16 levels per block are coarse on random weights.
    for (ty, bound) in [(Quant::F16, 5e-3), (Quant::Q8_0, 1e-1), (Quant::Q4_0, 8e-1)] {
        let q = prefill_logits(ty, &prompt, &audio);
        let e = rel(&q, &f32_logits);
        println!("{ty:?} prefill logits vs F32: {e:.2e} (bound {bound:.0e})");
        assert!(e < bound, "{ty:?}: {e}");
        assert!(e > 0.0, "{ty:?} should differ from F32 at all");
    }
}

/// A float WAV of `samples` with each sample repeated on every one of `channels`.
fn wav(rate: u32, channels: u16, samples: &[f32]) -> Vec<u8> {
    let interleaved: Vec<f32> = samples
        .iter()
        .flat_map(|&s| std::iter::repeat_n(s, usize::from(channels)))
        .collect();
    common::wav::float_interleaved(rate, channels, &interleaved)
}

#[test]
fn any_rate_and_channel_count_and_typed_errors() {
    let e = engine(Quant::F32);
    let opts = AsrOptions {
        max_new_tokens: 4,
        ..Default::default()
    };
    // 16 kHz stereo with identical channels reads as the mono signal: the same tokens.
    let sig = input_signal();
    let mono = e.asr(&sig, &opts).unwrap();
    let stereo = e.asr_wav(&wav(16_000, 2, &sig), &opts).unwrap();
    assert_eq!(stereo.tokens, mono.tokens);
    // 44.1 kHz input is resampled; it runs and gives as many audio rows as its duration implies.
    let r441: Vec<f32> = (0..44_100)
        .map(|i| ((i % 100) as f32 / 50.0 - 1.0) * 0.3)
        .collect();
    let out = e.asr_wav(&wav(44_100, 1, &r441), &opts).unwrap();
    assert_eq!(out.tokens.len(), 4);

    assert!(matches!(
        e.asr_wav(&wav(16_000, 1, &[]), &opts),
        Err(EngineError::Audio(AudioError::Empty))
    ));
    let mut nan = sig.clone();
    nan[100] = f32::NAN;
    assert!(matches!(
        e.asr(&nan, &opts),
        Err(EngineError::Audio(AudioError::NonFinite { index: 100 }))
    ));
    assert!(matches!(
        e.asr_wav(b"RIFF....not a wav", &opts),
        Err(EngineError::Audio(AudioError::Unreadable(_)))
    ));
    let short_limit = engine_with(
        Quant::F32,
        ModelOptions {
            max_audio_seconds: 1.0,
            ..Default::default()
        },
    );
    let err = short_limit.asr(&sig, &opts).unwrap_err();
    assert!(
        matches!(err, EngineError::Audio(AudioError::TooLong { .. })),
        "{err}"
    );
    assert!(err.is_invalid_request());
    let zero = AsrOptions {
        max_new_tokens: 0,
        ..Default::default()
    };
    assert!(matches!(
        e.asr(&sig, &zero),
        Err(EngineError::InvalidRequest(_))
    ));
    let huge = AsrOptions {
        max_new_tokens: 100_000,
        ..Default::default()
    };
    assert!(matches!(e.asr(&sig, &huge), Err(EngineError::Capacity(_))));
}

/// `ModelOptions::device`: the CPU named explicitly is the default's CPU (same bytes), and a
/// device whose backend this build lacks fails at load, naming the device and its feature.
#[test]
fn device_option_names_what_is_missing() {
    use audio_engine::ggml::Device;
    let opts = AsrOptions::default();
    let by_default = engine(Quant::F32).asr(&input_signal(), &opts).unwrap();
    let on_cpu = engine_with(
        Quant::F32,
        ModelOptions {
            device: Some(Device::Cpu),
            ..Default::default()
        },
    )
    .asr(&input_signal(), &opts)
    .unwrap();
    assert_eq!(on_cpu.text, by_default.text);
    assert_eq!(on_cpu.tokens, by_default.tokens);
    let paths = package(Quant::F32);
    for device in [Device::Cuda(0), Device::Metal, Device::Vulkan(0)] {
        if device.is_compiled_in() {
            continue;
        }
        let opts = ModelOptions {
            device: Some(device),
            ..Default::default()
        };
        let err = Lfm2Audio::from_package(ModelPackage::open_paths(paths.clone()).unwrap(), opts)
            .unwrap_err();
        // The whole chain, as a binary's `{:#}` prints it.
        let msg = common::error_chain(&err);
        assert!(msg.contains(&device.to_string()), "{msg}");
        assert!(msg.contains(device.feature().unwrap()), "{msg}");
    }
}

#[test]
fn converted_backbone_logits_agree_with_llama_cpp() {
    use lfm2_llm::llama::{ContextOptions, LlamaBatch, LlamaContext, LlamaModel};
    let paths = package(Quant::F32);
    let e = engine(Quant::F32);
    let toks = e.tokenizer().encode(
        "<|startoftext|>Numbers first, then voices: 2024 talks.",
        true,
    );
    assert!(toks.len() > 8);
    // llama.cpp's own lfm2 on the same file.
    let model = LlamaModel::load_cpu(&paths.backbone).unwrap();
    let opts = ContextOptions {
        exact_attention: true,
        ..Default::default()
    };
    let mut ctx = LlamaContext::new(&model, &opts, None).unwrap();
    let mut batch = LlamaBatch::new();
    for (i, &t) in toks.iter().enumerate() {
        batch.push(t as i32, i as i32, 0, true);
    }
    ctx.decode(&batch).unwrap();
    let want: Vec<f32> = (0..toks.len())
        .flat_map(|i| ctx.logits(i).unwrap().to_vec())
        .collect();
    let prompt: Vec<Option<u32>> = toks.iter().map(|&t| Some(t)).collect();
    let got = prefill_logits(Quant::F32, &prompt, &[]);
    let err = rel(&got, &want);
    println!("converted tiny backbone vs llama.cpp: {err:.2e}");
    assert!(err < 1e-3, "{err}");
}

#[test]
fn frames_embed_as_the_sum_of_their_codebook_rows() {
    use audio_engine::lfm2_audio::internals::backbone::AudioCodeTable;
    use audio_engine::lfm2_audio::internals::weights::WeightFile;
    let paths = package(Quant::F32);
    let pkg = ModelPackage::open_paths(paths.clone()).unwrap();
    let be = Backend::cpu().unwrap();
    be.set_n_threads(2).unwrap();
    let h = pkg.backbone.config.hidden_size as usize;
    let ncb = pkg.vocoder.config.codebooks as usize;
    let info = pkg.mmproj.tensor("a.position_embd.weight").unwrap();
    let table = pkg.mmproj.tensor_to_f32(info).unwrap();
    let size = table.len() / h / ncb;
    let mut bb = Backbone::load(pkg.backbone, &be).unwrap();
    let file = WeightFile::load_filtered(
        audio_engine::lfm2_audio::internals::weights::open_gguf(&paths.mmproj).unwrap(),
        &be,
        |n| n == "a.position_embd.weight",
    )
    .unwrap();
    bb.set_audio_codes(AudioCodeTable::new(file, "a.position_embd.weight", ncb, h).unwrap());

    let frames: Vec<Vec<u32>> = (0..3)
        .map(|f| {
            (0..ncb)
                .map(|cb| ((f * 977 + cb * 131) % size) as u32)
                .collect()
        })
        .collect();
    // The same sum on the host, in the same order (codebook 0 first).
    let sums: Vec<Vec<f32>> = frames
        .iter()
        .map(|codes| {
            let mut s = vec![0f32; h];
            for (cb, &c) in codes.iter().enumerate() {
                let row = &table[(cb * size + c as usize) * h..][..h];
                if cb == 0 {
                    s.copy_from_slice(row);
                } else {
                    s.iter_mut().zip(row).for_each(|(a, b)| *a += b);
                }
            }
            s
        })
        .collect();
    let lead = [Position::Text(1), Position::Text(6)];
    let run = |tail: Vec<Position<'_>>| {
        let mut c = bb.new_cache(16).unwrap();
        let mut p = lead.to_vec();
        p.extend(tail);
        bb.forward(&mut c, &p, Rows::All, true).unwrap()
    };
    let by_codes = run(frames.iter().map(|f| Position::Frame(f)).collect());
    let by_rows = run(sums.iter().map(|s| Position::Audio(s)).collect());
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(by_codes.logits.as_ref().unwrap()),
        bits(by_rows.logits.as_ref().unwrap())
    );
    assert_eq!(bits(&by_codes.hidden), bits(&by_rows.hidden));
    // Out-of-range codes and short frames are typed errors.
    let mut c = bb.new_cache(16).unwrap();
    let bad = vec![size as u32; ncb];
    assert!(bb
        .forward(&mut c, &[Position::Frame(&bad)], Rows::Last, true)
        .is_err());
    assert!(bb
        .forward(&mut c, &[Position::Frame(&bad[..1])], Rows::Last, true)
        .is_err());
    assert_eq!(c.len(), 0);
}

#[test]
fn asr_with_hands_over_the_text_and_stops_between_decode_steps() {
    let e = engine(Quant::F32);
    let opts = AsrOptions {
        max_new_tokens: reference().asr_tokens().len(),
        ..Default::default()
    };
    let full = e.asr(&input_signal(), &opts).unwrap();
    // A sink that never stops hears the whole text, piece by piece, and changes nothing.
    let mut pieces = Vec::new();
    let heard = e
        .asr_with(&input_signal(), &opts, &mut |t| {
            pieces.push(t.to_owned());
            true
        })
        .unwrap();
    assert_eq!(heard.tokens, full.tokens);
    assert_eq!(heard.text, full.text);
    assert_eq!(heard.stop, full.stop);
    assert_eq!(pieces.concat(), full.text);
    assert!(pieces.len() >= 3, "{} pieces: {pieces:?}", pieces.len());
    // Stopping at the second piece ends decoding there: a prefix of the tokens, and the sink
    // hears nothing after it said stop.
    let mut calls = 0;
    let cut = e
        .asr_with(&input_signal(), &opts, &mut |_| {
            calls += 1;
            calls < 2
        })
        .unwrap();
    assert_eq!(calls, 2);
    assert_eq!(cut.stop, StopReason::Stopped);
    assert!(cut.tokens.len() < full.tokens.len());
    assert!(full.tokens.starts_with(&cut.tokens));
    assert!(cut.text.starts_with(&pieces[..2].concat()));
    // The model is unchanged by the stop: the next run gives the same bytes.
    let again = e.asr(&input_signal(), &opts).unwrap();
    assert_eq!(again.tokens, full.tokens);
    assert_eq!(again.text, full.text);
}
