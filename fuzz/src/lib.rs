//! Shared pieces of the fuzz targets: a byte reader that turns libFuzzer's input into a script
//! of choices, the demo package (built once per process), and seed-corpus writing.
//!
//! Seeds: every target writes its seed corpus when started with `FUZZ_WRITE_SEEDS=DIR` (see
//! `fuzz/gen_seeds.sh`), so the committed corpus comes from the same Rust code that reads it
//! (the engine's own GGUF and reply writers) and is regenerated deterministically.

use std::path::Path;
use std::sync::OnceLock;

use audio_engine::lfm2_audio::PackagePaths;

/// Reads choices off the fuzzer's bytes; past the end every read gives zeros (an empty string),
/// so any input is a complete script.
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data }
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The unread bytes.
    pub fn rest(&self) -> &'a [u8] {
        self.data
    }

    /// One byte (0 past the end).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// Up to `n` bytes (fewer at the end).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        head
    }

    /// A byte string of length given by the next byte.
    pub fn short_bytes(&mut self) -> &'a [u8] {
        let n = usize::from(self.u8());
        self.take(n)
    }

    /// A byte string of length given by the next u16.
    pub fn long_bytes(&mut self) -> &'a [u8] {
        let n = usize::from(self.u16());
        self.take(n)
    }

    /// A string of length given by the next byte (invalid UTF-8 replaced, as a caller's own
    /// text would arrive after a lossy conversion).
    pub fn short_str(&mut self) -> String {
        String::from_utf8_lossy(self.short_bytes()).into_owned()
    }

    /// One of `choices` when the selector byte falls in range, else a fresh short string.
    pub fn pick_or_str(&mut self, choices: &[&str]) -> String {
        let sel = usize::from(self.u8());
        match choices.get(sel % (choices.len() + 1)) {
            Some(s) => (*s).to_owned(),
            None => self.short_str(),
        }
    }
}

/// Writes a short script's pieces in the format [`Bytes`] reads (for seed generation).
#[derive(Default)]
pub struct Script(pub Vec<u8>);

impl Script {
    /// One byte.
    pub fn u8(&mut self, b: u8) -> &mut Self {
        self.0.push(b);
        self
    }

    /// A little-endian u16.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A little-endian u32.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Raw bytes.
    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }

    /// What [`Bytes::short_bytes`] reads (at most 255 bytes).
    pub fn short_bytes(&mut self, b: &[u8]) -> &mut Self {
        assert!(b.len() <= 255, "short byte string of {} bytes", b.len());
        self.u8(b.len() as u8).raw(b)
    }

    /// What [`Bytes::long_bytes`] reads (at most 65535 bytes).
    pub fn long_bytes(&mut self, b: &[u8]) -> &mut Self {
        assert!(b.len() <= 65535, "long byte string of {} bytes", b.len());
        self.u16(b.len() as u16).raw(b)
    }

    /// What [`Bytes::pick_or_str`] reads as `choices[index]`.
    pub fn pick(&mut self, index: usize) -> &mut Self {
        self.u8(index as u8)
    }

    /// What [`Bytes::pick_or_str`] reads as the fresh string `s` (`n_choices` choices).
    pub fn fresh(&mut self, n_choices: usize, s: &str) -> &mut Self {
        self.u8(n_choices as u8).short_bytes(s.as_bytes())
    }

    /// The bytes.
    pub fn bytes(&self) -> Vec<u8> {
        self.0.clone()
    }
}

/// The demo package's files, written on first use into the shared demo directory (the one the
/// tests and examples use, `$TMPDIR/lfm2-audio-demo-<seed>`).
pub fn demo() -> &'static PackagePaths {
    static PATHS: OnceLock<PackagePaths> = OnceLock::new();
    PATHS.get_or_init(|| {
        let dir = audio_tooling::default_demo_dir();
        audio_tooling::ensure_demo_package(&dir).expect("demo package")
    })
}

/// Where targets whose readers take a path write each input: `/dev/shm` when it exists (a
/// file write and map per input stays in memory), else the temporary directory.
pub fn scratch_dir() -> std::path::PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// If `FUZZ_WRITE_SEEDS=DIR` is set, writes `seeds()` as files `DIR/<name>` and exits; called
/// from each target's `init`.
pub fn write_seeds_if_asked(seeds: impl FnOnce() -> Vec<(String, Vec<u8>)>) {
    let Some(dir) = std::env::var_os("FUZZ_WRITE_SEEDS") else {
        return;
    };
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir).expect("seed directory");
    for (name, bytes) in seeds() {
        std::fs::write(dir.join(&name), bytes).expect("writing a seed");
    }
    std::process::exit(0);
}

/// A WAV of `samples` (integer PCM of `bits`, or f32 when `bits == 32 && float`), interleaved.
pub fn wav_bytes(samples: &[f32], rate: u32, channels: u16, bits: u16, float: bool) -> Vec<u8> {
    let spec = hound_spec(rate, channels, bits, float);
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut w = hound::WavWriter::new(&mut out, spec).expect("wav writer");
        for &s in samples {
            if float {
                w.write_sample(s).expect("sample");
            } else {
                let full = (1i64 << (bits - 1)) as f32;
                let v = (s.clamp(-1.0, 1.0) * (full - 1.0)) as i32;
                w.write_sample(v).expect("sample");
            }
        }
        w.finalize().expect("finalize");
    }
    out.into_inner()
}

fn hound_spec(rate: u32, channels: u16, bits: u16, float: bool) -> hound::WavSpec {
    hound::WavSpec {
        channels,
        sample_rate: rate,
        bits_per_sample: bits,
        sample_format: if float {
            hound::SampleFormat::Float
        } else {
            hound::SampleFormat::Int
        },
    }
}

/// A deterministic test tone of `n` samples.
pub fn tone(n: usize) -> Vec<f32> {
    (0..n).map(|i| 0.3 * (i as f32 * 0.07).sin()).collect()
}
