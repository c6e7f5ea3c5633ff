//! The device attributes a [`DeviceInfo`] carries: their `CUdevice_attribute`
//! numbers (cuda.h of CUDA 13.0) and names, and lookups by number.

use crate::values::DeviceInfo;

/// `CU_DEVICE_ATTRIBUTE_*` numbers (cuda.h, CUDA 13.0) of the attributes rtrace reads.
pub mod attr {
    pub const MAX_THREADS_PER_BLOCK: i32 = 1;
    pub const MAX_BLOCK_DIM_X: i32 = 2;
    pub const MAX_BLOCK_DIM_Y: i32 = 3;
    pub const MAX_BLOCK_DIM_Z: i32 = 4;
    pub const MAX_GRID_DIM_X: i32 = 5;
    pub const MAX_GRID_DIM_Y: i32 = 6;
    pub const MAX_GRID_DIM_Z: i32 = 7;
    /// Bytes a block may use without opting in (48 KiB on every current GPU).
    pub const MAX_SHARED_MEMORY_PER_BLOCK: i32 = 8;
    pub const TOTAL_CONSTANT_MEMORY: i32 = 9;
    pub const WARP_SIZE: i32 = 10;
    pub const MAX_REGISTERS_PER_BLOCK: i32 = 12;
    /// kHz.
    pub const CLOCK_RATE: i32 = 13;
    pub const MULTIPROCESSOR_COUNT: i32 = 16;
    pub const INTEGRATED: i32 = 18;
    /// A `CUcomputemode`: 0 default, 2 prohibited, 3 exclusive process.
    pub const COMPUTE_MODE: i32 = 20;
    pub const CONCURRENT_KERNELS: i32 = 31;
    pub const ECC_ENABLED: i32 = 32;
    pub const PCI_BUS_ID: i32 = 33;
    pub const PCI_DEVICE_ID: i32 = 34;
    /// kHz.
    pub const MEMORY_CLOCK_RATE: i32 = 36;
    /// Bits.
    pub const GLOBAL_MEMORY_BUS_WIDTH: i32 = 37;
    /// Bytes.
    pub const L2_CACHE_SIZE: i32 = 38;
    pub const MAX_THREADS_PER_MULTIPROCESSOR: i32 = 39;
    pub const ASYNC_ENGINE_COUNT: i32 = 40;
    pub const PCI_DOMAIN_ID: i32 = 50;
    pub const COMPUTE_CAPABILITY_MAJOR: i32 = 75;
    pub const COMPUTE_CAPABILITY_MINOR: i32 = 76;
    /// Bytes of shared memory an SM has for blocks (the largest carveout).
    pub const MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: i32 = 81;
    pub const MAX_REGISTERS_PER_MULTIPROCESSOR: i32 = 82;
    pub const MULTI_GPU_BOARD: i32 = 84;
    pub const MULTI_GPU_BOARD_GROUP_ID: i32 = 85;
    pub const SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: i32 = 87;
    /// Bytes a block may use after opting in (`cuFuncSetAttribute`).
    pub const MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: i32 = 97;
    pub const MAX_BLOCKS_PER_MULTIPROCESSOR: i32 = 106;
    pub const MAX_PERSISTING_L2_CACHE_SIZE: i32 = 108;
    /// Bytes of shared memory the driver reserves in every block (compute capability 8.0 on).
    pub const RESERVED_SHARED_MEMORY_PER_BLOCK: i32 = 111;
    pub const CLUSTER_LAUNCH: i32 = 120;
}

/// Every attribute rtrace reads into a [`DeviceInfo`], with its cuda.h name
/// (without the `CU_DEVICE_ATTRIBUTE_` prefix), in the order it is read.
pub const DEVICE_ATTRIBUTES: &[(i32, &str)] = &[
    (attr::COMPUTE_CAPABILITY_MAJOR, "COMPUTE_CAPABILITY_MAJOR"),
    (attr::COMPUTE_CAPABILITY_MINOR, "COMPUTE_CAPABILITY_MINOR"),
    (attr::MULTIPROCESSOR_COUNT, "MULTIPROCESSOR_COUNT"),
    (attr::MAX_THREADS_PER_BLOCK, "MAX_THREADS_PER_BLOCK"),
    (
        attr::MAX_THREADS_PER_MULTIPROCESSOR,
        "MAX_THREADS_PER_MULTIPROCESSOR",
    ),
    (
        attr::MAX_BLOCKS_PER_MULTIPROCESSOR,
        "MAX_BLOCKS_PER_MULTIPROCESSOR",
    ),
    (attr::WARP_SIZE, "WARP_SIZE"),
    (attr::MAX_REGISTERS_PER_BLOCK, "MAX_REGISTERS_PER_BLOCK"),
    (
        attr::MAX_REGISTERS_PER_MULTIPROCESSOR,
        "MAX_REGISTERS_PER_MULTIPROCESSOR",
    ),
    (
        attr::MAX_SHARED_MEMORY_PER_BLOCK,
        "MAX_SHARED_MEMORY_PER_BLOCK",
    ),
    (
        attr::MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
        "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    ),
    (
        attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
    ),
    (
        attr::RESERVED_SHARED_MEMORY_PER_BLOCK,
        "RESERVED_SHARED_MEMORY_PER_BLOCK",
    ),
    (attr::TOTAL_CONSTANT_MEMORY, "TOTAL_CONSTANT_MEMORY"),
    (attr::CLOCK_RATE, "CLOCK_RATE"),
    (attr::MEMORY_CLOCK_RATE, "MEMORY_CLOCK_RATE"),
    (attr::GLOBAL_MEMORY_BUS_WIDTH, "GLOBAL_MEMORY_BUS_WIDTH"),
    (attr::L2_CACHE_SIZE, "L2_CACHE_SIZE"),
    (
        attr::MAX_PERSISTING_L2_CACHE_SIZE,
        "MAX_PERSISTING_L2_CACHE_SIZE",
    ),
    (attr::MAX_GRID_DIM_X, "MAX_GRID_DIM_X"),
    (attr::MAX_GRID_DIM_Y, "MAX_GRID_DIM_Y"),
    (attr::MAX_GRID_DIM_Z, "MAX_GRID_DIM_Z"),
    (attr::MAX_BLOCK_DIM_X, "MAX_BLOCK_DIM_X"),
    (attr::MAX_BLOCK_DIM_Y, "MAX_BLOCK_DIM_Y"),
    (attr::MAX_BLOCK_DIM_Z, "MAX_BLOCK_DIM_Z"),
    (attr::ASYNC_ENGINE_COUNT, "ASYNC_ENGINE_COUNT"),
    (attr::CONCURRENT_KERNELS, "CONCURRENT_KERNELS"),
    (attr::CLUSTER_LAUNCH, "CLUSTER_LAUNCH"),
    (
        attr::SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO,
        "SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO",
    ),
    (attr::PCI_DOMAIN_ID, "PCI_DOMAIN_ID"),
    (attr::PCI_BUS_ID, "PCI_BUS_ID"),
    (attr::PCI_DEVICE_ID, "PCI_DEVICE_ID"),
    (attr::MULTI_GPU_BOARD, "MULTI_GPU_BOARD"),
    (attr::MULTI_GPU_BOARD_GROUP_ID, "MULTI_GPU_BOARD_GROUP_ID"),
    (attr::INTEGRATED, "INTEGRATED"),
    (attr::ECC_ENABLED, "ECC_ENABLED"),
    (attr::COMPUTE_MODE, "COMPUTE_MODE"),
];

/// The cuda.h name (without `CU_DEVICE_ATTRIBUTE_`) of attribute `id`, when it
/// is one rtrace reads.
pub fn device_attribute_name(id: i32) -> Option<&'static str> {
    DEVICE_ATTRIBUTES
        .iter()
        .find(|(a, _)| *a == id)
        .map(|(_, name)| *name)
}

impl DeviceInfo {
    /// The value of attribute `id` (an [`attr`] number), if the device info holds it
    /// (the last pair wins if it appears twice).
    pub fn attribute(&self, id: i32) -> Option<i32> {
        self.attributes
            .iter()
            .rev()
            .find(|(a, _)| *a == id)
            .map(|&(_, v)| v)
    }

    /// `(major, minor)` compute capability, if both attributes are present.
    pub fn compute_capability(&self) -> Option<(i32, i32)> {
        Some((
            self.attribute(attr::COMPUTE_CAPABILITY_MAJOR)?,
            self.attribute(attr::COMPUTE_CAPABILITY_MINOR)?,
        ))
    }

    /// `domain:bus:device.0` as `nvidia-smi` writes it, if the PCI attributes are present.
    pub fn pci_address(&self) -> Option<String> {
        Some(format!(
            "{:08X}:{:02X}:{:02X}.0",
            self.attribute(attr::PCI_DOMAIN_ID)?,
            self.attribute(attr::PCI_BUS_ID)?,
            self.attribute(attr::PCI_DEVICE_ID)?
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn attributes_are_listed_once_and_looked_up() {
        let ids: HashSet<i32> = DEVICE_ATTRIBUTES.iter().map(|(a, _)| *a).collect();
        assert_eq!(ids.len(), DEVICE_ATTRIBUTES.len());
        assert_eq!(
            device_attribute_name(attr::RESERVED_SHARED_MEMORY_PER_BLOCK),
            Some("RESERVED_SHARED_MEMORY_PER_BLOCK")
        );
        assert_eq!(device_attribute_name(14), None);
        let d = DeviceInfo {
            attributes: vec![
                (attr::COMPUTE_CAPABILITY_MAJOR, 9),
                (attr::COMPUTE_CAPABILITY_MINOR, 0),
                (attr::MULTIPROCESSOR_COUNT, 100),
                (attr::MULTIPROCESSOR_COUNT, 132),
                (attr::PCI_DOMAIN_ID, 0),
                (attr::PCI_BUS_ID, 0x18),
                (attr::PCI_DEVICE_ID, 0),
            ],
            ..Default::default()
        };
        assert_eq!(d.compute_capability(), Some((9, 0)));
        assert_eq!(d.attribute(attr::MULTIPROCESSOR_COUNT), Some(132));
        assert_eq!(d.attribute(attr::WARP_SIZE), None);
        assert_eq!(d.pci_address().as_deref(), Some("00000000:18:00.0"));
    }
}
