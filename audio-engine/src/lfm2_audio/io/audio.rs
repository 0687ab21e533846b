//! WAV input and output, mono downmix and resampling to the model's 16 kHz input rate.
//!
//! Input: any WAV that `hound` can parse (PCM integer 8/16/24/32-bit, IEEE float 32-bit, plain
//! or `WAVE_FORMAT_EXTENSIBLE`, any channel count, sample rates from [`MIN_SAMPLE_RATE`] to
//! [`MAX_SAMPLE_RATE`]). Channels are averaged to mono (liquid-audio's `ChatState.add_audio` takes
//! mono only; its data mapper reads WAVs as float32 and averages the channels, which this
//! reproduces bit for bit for stereo) and the result is resampled to [`INPUT_SAMPLE_RATE`] with
//! [`resample`], which is liquid-audio's resampler: `torchaudio.functional.resample` at its
//! defaults (Hann-windowed sinc, width 6, roll-off 0.99), with torchaudio's float32 kernel
//! rounding and output length. Matching it matters because liquid-audio puts every input that is
//! not 16 kHz through that filter; a different one (even a sharper one) shifts the features
//! enough to change greedy tokens where margins are small. 16 kHz input passes through
//! untouched. Output: 24 kHz mono 32-bit float WAVs, the detokenizer's native format.
//!
//! Every malformed input maps to a typed [`AudioError`]; nothing here panics on bad data.

use std::fs::File;
use std::io::{BufReader, BufWriter, Cursor, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Sample rate the feature extractor and encoder expect (Hz).
pub const INPUT_SAMPLE_RATE: u32 = 16_000;

/// Sample rate of the audio the detokenizer produces (Hz).
pub const OUTPUT_SAMPLE_RATE: u32 = 24_000;

/// Default longest input accepted, in seconds.
///
/// Ten minutes of audio become 7 500 encoder embeddings (12.5 per second), which still fits the
/// 8 192-step conversation limit; anything longer could never be used whole.
pub const DEFAULT_MAX_SECONDS: f64 = 600.0;

/// Lowest sample rate accepted for input or resampling (Hz).
pub const MIN_SAMPLE_RATE: u32 = 1_000;
/// Highest sample rate accepted for input or resampling (Hz). Bounds the resampler's cost: its
/// kernel length grows with the ratio of the two rates.
pub const MAX_SAMPLE_RATE: u32 = 192_000;

fn check_rate(rate: u32) -> Result<(), AudioError> {
    if (MIN_SAMPLE_RATE..=MAX_SAMPLE_RATE).contains(&rate) {
        Ok(())
    } else {
        Err(AudioError::UnsupportedFormat(format!(
            "sample rate {rate} Hz outside {MIN_SAMPLE_RATE}..={MAX_SAMPLE_RATE} Hz"
        )))
    }
}

/// Refuses `seconds` over `limit` (and everything when the limit is NaN).
fn check_duration(seconds: f64, limit: f64) -> Result<(), AudioError> {
    match seconds.partial_cmp(&limit) {
        Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal) => Ok(()),
        _ => Err(AudioError::TooLong { seconds, limit }),
    }
}

/// Why audio could not be read, resampled or written.
#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    /// A file could not be opened or created.
    #[error("cannot access {path}: {source}")]
    Io {
        /// The file in question.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a well-formed WAV file (bad header, truncated data, not RIFF at all).
    #[error("unreadable WAV: {0}")]
    Unreadable(String),
    /// The WAV is well formed but uses an encoding this engine does not decode
    /// (e.g. 64-bit float, A-law, a zero sample rate).
    #[error("unsupported WAV format: {0}")]
    UnsupportedFormat(String),
    /// The audio holds no samples.
    #[error("audio is empty")]
    Empty,
    /// A sample is NaN or infinite.
    #[error("sample {index} is not finite")]
    NonFinite {
        /// Index of the first offending sample (a frame index for multi-channel input).
        index: usize,
    },
    /// A finite sample is too large to resample: the filter's output leaves the f32 range
    /// (float WAVs can hold values up to 3.4e38; speech is nominally within [-1, 1]).
    #[error("sample {index} is too large to resample (the result is not a finite f32)")]
    OutOfRange {
        /// Index of the input sample nearest the first output that overflowed.
        index: usize,
    },
    /// Writing a WAV failed (an I/O error of the destination).
    #[error("cannot write WAV: {0}")]
    Write(String),
    /// The audio is longer than the configured limit.
    #[error("audio lasts {seconds:.3} s, over the {limit:.3} s limit")]
    TooLong {
        /// Duration of the input in seconds.
        seconds: f64,
        /// The limit in force, in seconds.
        limit: f64,
    },
}

/// Options for reading WAV input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadOptions {
    /// Longest accepted input, in seconds (judged from the header before any sample is decoded,
    /// so an oversized upload costs nothing).
    pub max_seconds: f64,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            max_seconds: DEFAULT_MAX_SECONDS,
        }
    }
}

/// Mono audio at a given sample rate.
#[derive(Debug, Clone, PartialEq)]
pub struct MonoAudio {
    /// Sample rate in Hz.
    pub sample_rate: u32,
    /// Samples, nominally in [-1, 1].
    pub samples: Vec<f32>,
}

impl MonoAudio {
    /// Duration in seconds.
    pub fn duration_seconds(&self) -> f64 {
        self.samples.len() as f64 / f64::from(self.sample_rate)
    }
}

fn map_hound(err: hound::Error) -> AudioError {
    match err {
        hound::Error::Unsupported => {
            AudioError::UnsupportedFormat("unsupported WAV encoding".into())
        }
        hound::Error::TooWide => {
            AudioError::UnsupportedFormat("sample width too large to decode".into())
        }
        hound::Error::InvalidSampleFormat => {
            AudioError::UnsupportedFormat("sample format does not match its width".into())
        }
        other => AudioError::Unreadable(other.to_string()),
    }
}

/// Decodes a WAV stream to mono at its own sample rate.
fn decode<R: Read>(reader: R, opts: &ReadOptions) -> Result<MonoAudio, AudioError> {
    let mut wav = hound::WavReader::new(reader).map_err(map_hound)?;
    let spec = wav.spec();
    check_rate(spec.sample_rate)?;
    if spec.channels == 0 {
        return Err(AudioError::UnsupportedFormat("channel count is 0".into()));
    }
    let channels = usize::from(spec.channels);
    // Judge the length from the header first so that a huge upload is refused before decoding.
    let frames = wav.duration() as usize;
    let seconds = frames as f64 / f64::from(spec.sample_rate);
    check_duration(seconds, opts.max_seconds)?;
    if frames == 0 {
        return Err(AudioError::Empty);
    }

    // The header's length is only a claim: cap the up-front allocation and let the vector grow.
    let mut mono = Vec::with_capacity(frames.min(1 << 22));
    let mut downmix = Downmix::new(channels);
    let mut push = |value: f64, mono: &mut Vec<f32>| downmix.push(value, mono);
    match spec.sample_format {
        hound::SampleFormat::Float => {
            if spec.bits_per_sample != 32 {
                return Err(AudioError::UnsupportedFormat(format!(
                    "{}-bit float samples",
                    spec.bits_per_sample
                )));
            }
            for sample in wav.samples::<f32>() {
                let sample = sample.map_err(map_hound)?;
                if !sample.is_finite() {
                    return Err(AudioError::NonFinite { index: mono.len() });
                }
                push(f64::from(sample), &mut mono);
            }
        }
        hound::SampleFormat::Int => {
            if !(1..=32).contains(&spec.bits_per_sample) {
                return Err(AudioError::UnsupportedFormat(format!(
                    "{}-bit integer samples",
                    spec.bits_per_sample
                )));
            }
            // Full scale is 2^(bits-1), as soundfile/torchaudio normalise integer PCM.
            let scale = 1.0 / (1u64 << (spec.bits_per_sample - 1)) as f64;
            for sample in wav.samples::<i32>() {
                let sample = sample.map_err(map_hound)?;
                push(f64::from(sample) * scale, &mut mono);
            }
        }
    }
    if mono.is_empty() {
        return Err(AudioError::Empty);
    }
    Ok(MonoAudio {
        sample_rate: spec.sample_rate,
        samples: mono,
    })
}

/// Averages interleaved channels to mono: the sum of a frame in f64, times 1 / channels (the
/// WAV reader and caller-given PCM share it, so both give the same bits).
struct Downmix {
    channels: usize,
    inv_channels: f64,
    acc: f64,
    in_frame: usize,
}

impl Downmix {
    fn new(channels: usize) -> Downmix {
        Downmix {
            channels,
            inv_channels: 1.0 / channels as f64,
            acc: 0.0,
            in_frame: 0,
        }
    }

    fn push(&mut self, value: f64, mono: &mut Vec<f32>) {
        self.acc += value;
        self.in_frame += 1;
        if self.in_frame == self.channels {
            mono.push((self.acc * self.inv_channels) as f32);
            self.acc = 0.0;
            self.in_frame = 0;
        }
    }
}

/// Interleaved float PCM as the model's input: channels averaged, resampled to 16 kHz, exactly
/// as a 32-bit float WAV of the same samples reads ([`load_wav_bytes_16k`]). The rate, the
/// channel count, the length (whole frames, within `opts.max_seconds`) and every sample
/// (finite) are checked first.
pub fn pcm_16k(
    interleaved: &[f32],
    sample_rate: u32,
    channels: u16,
    opts: &ReadOptions,
) -> Result<Vec<f32>, AudioError> {
    check_rate(sample_rate)?;
    if channels == 0 {
        return Err(AudioError::UnsupportedFormat("channel count is 0".into()));
    }
    let ch = usize::from(channels);
    if interleaved.len() % ch != 0 {
        return Err(AudioError::UnsupportedFormat(format!(
            "{} samples are not whole frames of {ch} channels",
            interleaved.len()
        )));
    }
    let frames = interleaved.len() / ch;
    check_duration(frames as f64 / f64::from(sample_rate), opts.max_seconds)?;
    if frames == 0 {
        return Err(AudioError::Empty);
    }
    let mut mono = Vec::with_capacity(frames);
    let mut downmix = Downmix::new(ch);
    for &s in interleaved {
        if !s.is_finite() {
            return Err(AudioError::NonFinite { index: mono.len() });
        }
        downmix.push(f64::from(s), &mut mono);
    }
    resample(&mono, sample_rate, INPUT_SAMPLE_RATE)
}

/// Audio a request hands the engine: a WAV file's bytes, or samples.
#[derive(Debug, Clone, PartialEq)]
pub enum AudioInput {
    /// WAV bytes (any rate, any channel count, integer or float samples).
    Wav(Vec<u8>),
    /// Interleaved float samples at `sample_rate` with `channels` channels (a C caller's PCM):
    /// no WAV is written for it.
    Pcm {
        /// Frames of `channels` samples each.
        samples: Vec<f32>,
        /// Samples per second and channel.
        sample_rate: u32,
        /// Channels per frame.
        channels: u16,
    },
}

impl AudioInput {
    /// The audio's length in seconds, from the WAV header alone (no sample is decoded) or from
    /// the PCM's frame count; an unreadable header is the reader's error.
    pub fn duration_seconds(&self) -> Result<f64, AudioError> {
        match self {
            AudioInput::Wav(bytes) => {
                let wav = hound::WavReader::new(Cursor::new(bytes)).map_err(map_hound)?;
                let rate = wav.spec().sample_rate;
                check_rate(rate)?;
                Ok(f64::from(wav.duration()) / f64::from(rate))
            }
            AudioInput::Pcm {
                samples,
                sample_rate,
                channels,
            } => {
                check_rate(*sample_rate)?;
                let frames = samples.len() / usize::from((*channels).max(1));
                Ok(frames as f64 / f64::from(*sample_rate))
            }
        }
    }

    /// The model's input: mono, 16 kHz (see [`load_wav_bytes_16k`] and [`pcm_16k`]).
    pub fn samples_16k(&self, opts: &ReadOptions) -> Result<Vec<f32>, AudioError> {
        match self {
            AudioInput::Wav(bytes) => load_wav_bytes_16k(bytes, opts),
            AudioInput::Pcm {
                samples,
                sample_rate,
                channels,
            } => pcm_16k(samples, *sample_rate, *channels, opts),
        }
    }

    /// Mono samples already at 16 kHz.
    pub fn mono_16k(samples: Vec<f32>) -> AudioInput {
        AudioInput::Pcm {
            samples,
            sample_rate: INPUT_SAMPLE_RATE,
            channels: 1,
        }
    }
}

impl Default for AudioInput {
    /// No audio (an empty WAV, which reads as an error).
    fn default() -> AudioInput {
        AudioInput::Wav(Vec::new())
    }
}

impl From<Vec<u8>> for AudioInput {
    fn from(wav: Vec<u8>) -> AudioInput {
        AudioInput::Wav(wav)
    }
}

/// Decodes WAV bytes to mono at the file's own sample rate (channels averaged).
pub fn decode_wav_bytes(bytes: &[u8], opts: &ReadOptions) -> Result<MonoAudio, AudioError> {
    decode(Cursor::new(bytes), opts)
}

/// Decodes a WAV file to mono at the file's own sample rate (channels averaged).
pub fn decode_wav_file(path: &Path, opts: &ReadOptions) -> Result<MonoAudio, AudioError> {
    let file = File::open(path).map_err(|source| AudioError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    decode(BufReader::new(file), opts)
}

/// Reads WAV bytes as the model's input: mono, 16 kHz, f32.
pub fn load_wav_bytes_16k(bytes: &[u8], opts: &ReadOptions) -> Result<Vec<f32>, AudioError> {
    let audio = decode_wav_bytes(bytes, opts)?;
    resample(&audio.samples, audio.sample_rate, INPUT_SAMPLE_RATE)
}

/// Reads a WAV file as the model's input: mono, 16 kHz, f32.
pub fn load_wav_file_16k(path: &Path, opts: &ReadOptions) -> Result<Vec<f32>, AudioError> {
    let audio = decode_wav_file(path, opts)?;
    resample(&audio.samples, audio.sample_rate, INPUT_SAMPLE_RATE)
}

/// Checks raw samples handed in by a caller (not read from a WAV): non-empty, finite and no
/// longer than `opts.max_seconds` at `sample_rate`.
pub fn validate_samples(
    samples: &[f32],
    sample_rate: u32,
    opts: &ReadOptions,
) -> Result<(), AudioError> {
    check_rate(sample_rate)?;
    if samples.is_empty() {
        return Err(AudioError::Empty);
    }
    let seconds = samples.len() as f64 / f64::from(sample_rate);
    check_duration(seconds, opts.max_seconds)?;
    if let Some(index) = samples.iter().position(|s| !s.is_finite()) {
        return Err(AudioError::NonFinite { index });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Resampling
// ---------------------------------------------------------------------------------------------

/// Zero crossings of the low-pass sinc kept on each side of the kernel centre
/// (torchaudio's `lowpass_filter_width`, default 6).
pub const RESAMPLE_LOWPASS_FILTER_WIDTH: u32 = 6;
/// Cut-off of the anti-aliasing low-pass as a fraction of the lower of the two Nyquist
/// frequencies (torchaudio's `rolloff`, default 0.99).
pub const RESAMPLE_ROLLOFF: f64 = 0.99;

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// torchaudio's `sinc_interp_hann` kernel for one rate pair, built the way
/// `torchaudio.functional.functional._get_sinc_resample_kernel` builds it for a float32 waveform.
///
/// With `orig = from / gcd` and `new = to / gcd`, output sample `m * new + k` is
/// `sum_j padded[m * orig + j] * kernel[k][j]`, where `padded` is the input with `width` zeros
/// in front, and tap `j` of phase `k` sits at
/// `t = (-k / new + (j - width) / orig) * base_freq` (`base_freq = min(orig, new) * rolloff`),
/// in units of the low-pass's zero crossings. Its value is
/// `sinc(pi t) * cos(pi t / (2 * 6))^2 * base_freq / orig` for `|t| < 6`.
///
/// Precision: liquid-audio hands torchaudio float32 waveforms, and torchaudio then computes `t`
/// in float32. For 44.1 kHz (`orig = 441`, `new = 160`) the cancellation in
/// `-k / new + (j - width) / orig` leaves `t` off by up to ~2e-5 from its exact value, which moves
/// the output by ~4e-6 of full scale: more than everything else together. So `t` is computed
/// here with the same float32 operations in the same order (basic operations are correctly
/// rounded, so these are bit-identical to torch's), and only the sine and cosine are evaluated in
/// f64 (then rounded to f32, where torch's vectorised float32 routines are within an ulp of
/// that). The taps are the f32 values torchaudio would hold; the convolution sums them in f64.
///
/// torchaudio keeps `2 * width + orig` taps per phase and clamps `t` to `[-6, 6]`; the clamped
/// taps outside the window are below 1e-23 (`cos(pi / 2)^2` in float32 times `sin(6 pi)`), so
/// only the taps with `|t| < 6` (a contiguous run, since `t` grows with `j`) are kept.
struct SincKernel {
    orig: usize,
    new: usize,
    width: usize,
    /// Per phase `k`: index `j` of its first kept tap, and the range of its taps in `taps`.
    phases: Vec<(usize, std::ops::Range<usize>)>,
    taps: Vec<f64>,
}

impl SincKernel {
    fn new(from: u32, to: u32) -> Self {
        let g = gcd(u64::from(from), u64::from(to));
        let orig = (u64::from(from) / g) as usize;
        let new = (u64::from(to) / g) as usize;
        let lpw = RESAMPLE_LOWPASS_FILTER_WIDTH;
        // Python floats (f64) as in torchaudio: base_freq, width and scale.
        let base_freq = orig.min(new) as f64 * RESAMPLE_ROLLOFF;
        let width = ((u64::from(lpw) * orig as u64) as f64 / base_freq).ceil() as usize;
        let n_cols = 2 * width + orig;
        // The float32 constants torch multiplies and divides the float32 tensors by.
        let base_f32 = base_freq as f32;
        let scale_f32 = (base_freq / orig as f64) as f32;
        let lpw_f32 = lpw as f32;
        let (orig_f32, new_f32, width_f32) = (orig as f32, new as f32, width as f32);
        let pi = std::f32::consts::PI;

        // t of tap j in phase k, rounded exactly as torch rounds it (before the clamp).
        let position = |k: usize, j: usize| -> f32 {
            let idx = (j as f32 - width_f32) / orig_f32;
            let phase = -(k as f32) / new_f32;
            (phase + idx) * base_f32
        };
        let tap = |t: f32| -> f64 {
            let c = (f64::from(t * pi / lpw_f32 / 2.0)).cos() as f32;
            let window = c * c;
            let arg = t * pi;
            let sinc = if arg == 0.0 {
                1.0
            } else {
                (f64::from(arg)).sin() as f32 / arg
            };
            f64::from(sinc * (window * scale_f32))
        };
        let inside = |t: f32| t.abs() < lpw_f32;

        let mut phases = Vec::with_capacity(new);
        let mut taps = Vec::new();
        for k in 0..new {
            // The tap nearest the output instant (t close to 0), then outwards while |t| < 6.
            let centre = width + (k * orig + new / 2) / new;
            debug_assert!(inside(position(k, centre)));
            let mut first = centre;
            while first > 0 && inside(position(k, first - 1)) {
                first -= 1;
            }
            let mut end = centre + 1;
            while end < n_cols && inside(position(k, end)) {
                end += 1;
            }
            let start = taps.len();
            taps.extend((first..end).map(|j| tap(position(k, j))));
            phases.push((first, start..taps.len()));
        }
        Self {
            orig,
            new,
            width,
            phases,
            taps,
        }
    }

    /// torchaudio's output length for `n` input samples: `ceil(new * n / orig)`, evaluated as
    /// it does (a Python float made a float32 tensor before the `ceil`, so for long inputs a small
    /// fractional part can round away and the output is one sample shorter than the exact
    /// ceiling), and no more than the convolution yields (`n / orig + 1` frames of `new`).
    fn output_len(&self, n: usize) -> usize {
        let (orig, new) = (self.orig as u64, self.new as u64);
        let ratio = (new * n as u64) as f64 / orig as f64;
        let target = f64::from(ratio as f32).ceil() as u64;
        target.min((n as u64 / orig + 1) * new) as usize
    }

    fn apply(&self, samples: &[f32]) -> Vec<f32> {
        let input: Vec<f64> = samples.iter().map(|&s| f64::from(s)).collect();
        let n_out = self.output_len(samples.len());
        let mut out = Vec::with_capacity(n_out);
        for o in 0..n_out {
            let (m, k) = (o / self.new, o % self.new);
            let (first, range) = &self.phases[k];
            // Padded index m * orig + first is input index m * orig + first - width.
            let start = (m * self.orig + first) as i64 - self.width as i64;
            out.push(dot(&input, start, &self.taps[range.clone()]) as f32);
        }
        out
    }
}

/// Resamples mono audio from `from` Hz to `to` Hz exactly as liquid-audio does:
/// `torchaudio.functional.resample(wave, from, to)` at its defaults (`sinc_interp_hann`,
/// [`RESAMPLE_LOWPASS_FILTER_WIDTH`] = 6, [`RESAMPLE_ROLLOFF`] = 0.99) on a float32 waveform.
///
/// liquid-audio's `ChatState.add_audio` (and its training data mapper) resample every input
/// this way before the feature extractor, so the model sees audio with this filter's gentle band
/// edge (for 16 kHz output: -0.1 dB at 6 kHz, -1.8 dB at 7 kHz, -5.9 dB at 7.9 kHz) and its
/// modest stop band (a 9 kHz tone folds back at -17 dB, 12 kHz at -55 dB). A sharper filter
/// gives other features and, where greedy margins are small, other tokens.
///
/// The filter is a Hann-windowed sinc low-pass at `rolloff` times the lower of the two Nyquist
/// frequencies, six zero crossings each side, applied as torchaudio applies it: a polyphase
/// filter over the rates reduced by their gcd, output sample `n` at input time `n * from / to`
/// (no delay), samples outside the input read as zero. Like torchaudio's, the taps are not
/// normalised: the DC gain is about 1 + 5e-4 when downsampling. The kernel's float32 rounding
/// is reproduced (torchaudio computes the tap positions in the waveform's dtype, and the
/// cancellation in them is the largest float32 error for 44.1 kHz input); the convolution is
/// summed in f64 in a fixed order, so results are deterministic and within a few 1e-7 of
/// torchaudio's own float32 output.
///
/// The output has torchaudio's length, `ceil(len * to / from)` (the ratio rounded to float32
/// first, as torchaudio does: for long inputs, e.g. from about 65 536 output samples for 44.1 kHz
/// input, that can be one sample fewer).
/// When `from == to` the input is returned unchanged, bit for bit (torchaudio returns the same
/// tensor). Rates outside [`MIN_SAMPLE_RATE`]`..=`[`MAX_SAMPLE_RATE`] are refused with
/// [`AudioError::UnsupportedFormat`].
pub fn resample(samples: &[f32], from: u32, to: u32) -> Result<Vec<f32>, AudioError> {
    if from == to && from != 0 {
        return Ok(samples.to_vec());
    }
    check_rate(from)?;
    check_rate(to)?;
    if samples.is_empty() {
        return Ok(Vec::new());
    }
    let out = SincKernel::new(from, to).apply(samples);
    // why: the sinc filter overshoots, so inputs near f32::MAX come out infinite (found by the
    // fuzz target wav); refuse them here rather than hand the features non-finite samples.
    if let Some(i) = out.iter().position(|x| !x.is_finite()) {
        let index = (i as u64 * u64::from(from) / u64::from(to)) as usize;
        return Err(AudioError::OutOfRange {
            index: index.min(samples.len() - 1),
        });
    }
    Ok(out)
}

/// `sum(input[start + i] * taps[i])`, with input outside its bounds read as zero.
fn dot(input: &[f64], start: i64, taps: &[f64]) -> f64 {
    let lo = start.max(0);
    let hi = (start + taps.len() as i64).min(input.len() as i64);
    if hi <= lo {
        return 0.0;
    }
    let xs = &input[lo as usize..hi as usize];
    let ts = &taps[(lo - start) as usize..(hi - start) as usize];
    // Four independent partial sums: a fixed order (deterministic) that the compiler can
    // vectorise.
    let mut acc = [0.0f64; 4];
    let mut xc = xs.chunks_exact(4);
    let mut tc = ts.chunks_exact(4);
    for (x, t) in (&mut xc).zip(&mut tc) {
        for k in 0..4 {
            acc[k] += x[k] * t[k];
        }
    }
    let mut tail = 0.0;
    for (x, t) in xc.remainder().iter().zip(tc.remainder()) {
        tail += x * t;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/// Writes mono 32-bit float WAV data at `sample_rate` to a seekable writer.
///
/// Non-finite samples are refused ([`AudioError::NonFinite`]) rather than written, since players
/// and downstream tools treat them inconsistently.
pub fn write_wav_f32<W: Write + Seek>(
    writer: W,
    samples: &[f32],
    sample_rate: u32,
) -> Result<(), AudioError> {
    if sample_rate == 0 {
        return Err(AudioError::UnsupportedFormat("sample rate is 0".into()));
    }
    if let Some(index) = samples.iter().position(|s| !s.is_finite()) {
        return Err(AudioError::NonFinite { index });
    }
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let write_err = |e: hound::Error| AudioError::Write(e.to_string());
    let mut wav = hound::WavWriter::new(writer, spec).map_err(write_err)?;
    for &s in samples {
        wav.write_sample(s).map_err(write_err)?;
    }
    wav.finalize().map_err(write_err)
}

/// Encodes 24 kHz mono audio (the detokenizer's output) as 32-bit float WAV bytes.
pub fn encode_wav_24k(samples: &[f32]) -> Result<Vec<u8>, AudioError> {
    let mut cursor = Cursor::new(Vec::with_capacity(44 + samples.len() * 4));
    write_wav_f32(&mut cursor, samples, OUTPUT_SAMPLE_RATE)?;
    Ok(cursor.into_inner())
}

/// Writes 24 kHz mono audio (the detokenizer's output) to a 32-bit float WAV file.
pub fn write_wav_file_24k(path: &Path, samples: &[f32]) -> Result<(), AudioError> {
    let io_err = |source| AudioError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::create(path).map_err(io_err)?;
    let mut writer = BufWriter::new(file);
    write_wav_f32(&mut writer, samples, OUTPUT_SAMPLE_RATE)?;
    writer.flush().map_err(io_err)
}
