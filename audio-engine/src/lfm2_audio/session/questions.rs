//! Encoder-output reuse: the questions a session keeps (samples and encoder rows) and the
//! encode that takes a kept question's rows when its samples match byte for byte.

use crate::ggml::Backend;
use crate::lfm2_audio::error::EngineError;
use crate::lfm2_audio::io::audio::AudioInput;

use super::Session;

/// Whether two questions are the same samples (size and bytes).
fn same_samples(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// A question's samples and their encoder output (`rows` rows of the adapter's width).
#[derive(Debug, Clone)]
pub(super) struct KeptQuestion {
    pub(super) samples: Vec<f32>,
    pub(super) rows: usize,
    pub(super) embeddings: Vec<f32>,
}

impl KeptQuestion {
    /// No spoken question (a typed one): nothing to keep or reuse.
    pub(super) fn none() -> KeptQuestion {
        KeptQuestion {
            samples: Vec::new(),
            rows: 0,
            embeddings: Vec::new(),
        }
    }
}

impl Session {
    pub(super) fn encode_question(
        &self,
        backend: &Backend,
        samples: &[f32],
        kept: &[KeptQuestion],
    ) -> Result<(KeptQuestion, bool), EngineError> {
        if let Some(k) = kept.iter().find(|k| same_samples(&k.samples, samples)) {
            return Ok((k.clone(), true));
        }
        let (rows, embeddings) =
            self.model
                .encode_audio_on(backend, self.encoder_alloc.as_ref(), samples)?;
        Ok((
            KeptQuestion {
                samples: samples.to_vec(),
                rows,
                embeddings,
            },
            false,
        ))
    }

    /// Reads and encodes a turn's new question: the encoder output of `early` (the question
    /// of a turn started early) when its samples are these, else a fresh encode; the kept
    /// questions of earlier turns are not asked (`reused_questions` counts only those).
    pub(super) fn hear_question(
        &self,
        backend: &Backend,
        input: &AudioInput,
        early: Option<KeptQuestion>,
    ) -> Result<KeptQuestion, EngineError> {
        let mut early = early;
        let mut encoded = |samples: &[f32]| {
            early
                .take()
                .filter(|k| same_samples(&k.samples, samples))
                .map(|k| (k.rows, k.embeddings))
        };
        let (samples, rows, embeddings) =
            self.model
                .hear_on(backend, self.encoder_alloc.as_ref(), input, &mut encoded)?;
        Ok(KeptQuestion {
            samples,
            rows,
            embeddings,
        })
    }

    /// Keeps `questions` (a request's, in prompt order) as the most recent, without duplicates,
    /// at most [`SessionOptions::kept_questions`](super::SessionOptions::kept_questions).
    pub(super) fn keep_questions(&mut self, questions: Vec<KeptQuestion>) {
        for q in questions
            .into_iter()
            .rev()
            .filter(|q| !q.samples.is_empty())
        {
            self.questions
                .retain(|k| !same_samples(&k.samples, &q.samples));
            self.questions.insert(0, q);
        }
        self.questions.truncate(self.options.kept_questions);
    }
}
