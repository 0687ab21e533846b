//! [`Backend::for_device`]: opens a [`Device`] from ggml's backend registry, or says why it
//! cannot.
//!
//! why apart from `device.rs`: the spec and its errors are plain data that the crate's error
//! type holds; opening one needs the backend, which sits above that error type.

use super::backend::{devices_of_registry, Backend};
use super::device::{Device, DeviceError};
use super::error::Result;

impl Backend {
    /// A backend on `device`: the CPU backend, or the device's GPU backend.
    ///
    /// Fails with [`DeviceError::NotCompiledIn`] (naming the device and the feature) when the
    /// build lacks its backend, [`DeviceError::NotFound`] (listing the backend's devices) when
    /// the index is out of range, and [`DeviceError::InitFailed`] when ggml cannot start it.
    ///
    /// ggml's Vulkan backend skips CPU-type devices (Mesa's lavapipe) unless the environment
    /// variable `GGML_VK_VISIBLE_DEVICES` lists them (e.g. `GGML_VK_VISIBLE_DEVICES=0`), read once
    /// when the registry starts.
    pub fn for_device(device: &Device) -> Result<Backend> {
        let device = *device;
        if device == Device::Cpu {
            return Backend::cpu();
        }
        let Some(feature) = device.feature().filter(|_| !device.is_compiled_in()) else {
            return open_registered(device);
        };
        Err(DeviceError::NotCompiledIn { device, feature }.into())
    }
}

fn open_registered(device: Device) -> Result<Backend> {
    let devs = devices_of_registry(device.registry_name());
    let Some(&(dev, _)) = devs.get(device.index()) else {
        let hint = if matches!(device, Device::Vulkan(_)) && devs.is_empty() {
            " (ggml's Vulkan backend skips CPU-type devices such as lavapipe unless \
             GGML_VK_VISIBLE_DEVICES lists them)"
        } else {
            ""
        };
        return Err(DeviceError::NotFound {
            device,
            found: devs.into_iter().map(|(_, label)| label).collect(),
            hint,
        }
        .into());
    };
    Backend::from_device(dev).map_err(|_| DeviceError::InitFailed { device }.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_opens_the_cpu_backend() {
        let b = Backend::for_device(&Device::Cpu).unwrap();
        assert!(b.is_cpu());
    }

    #[test]
    fn a_device_whose_feature_is_missing_is_named_in_the_error() {
        for d in [Device::Vulkan(0), Device::Cuda(0), Device::Metal] {
            if d.is_compiled_in() {
                continue;
            }
            let e = Backend::for_device(&d).unwrap_err();
            let feature = d.feature().unwrap();
            assert_eq!(
                e,
                DeviceError::NotCompiledIn { device: d, feature }.into(),
                "{d}"
            );
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!("{d}: this build has no ")),
                "{msg}"
            );
            assert!(msg.contains(&format!("(feature `{feature}`)")), "{msg}");
        }
        if !cfg!(feature = "vulkan") {
            let e = Backend::for_device(&Device::Vulkan(0)).unwrap_err();
            assert_eq!(
                e.to_string(),
                "vulkan:0: this build has no Vulkan backend (feature `vulkan`)"
            );
        }
    }

    #[test]
    fn an_index_out_of_range_lists_the_devices_found() {
        // Only a compiled-in backend gets as far as the index; with none, this test has no
        // device kind to try.
        for d in [Device::Vulkan(1000), Device::Cuda(1000)] {
            if !d.is_compiled_in() {
                continue;
            }
            let e = Backend::for_device(&d).unwrap_err();
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("{d}: no such device; ")), "{msg}");
            match e {
                super::super::GgmlError::Device(DeviceError::NotFound { device, .. }) => {
                    assert_eq!(device, d)
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
