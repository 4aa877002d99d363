//! Compile-only check of `fcan_embassy::esp_twai` for the ESP32-C3: the io-board node
//! run by fcan-embassy's loop over esp-hal's TWAI. Not a firmware (no entry point,
//! bootloader or time driver): it proves that the adapter, the loop and the node build
//! for `riscv32imc-unknown-none-elf` against esp-hal's real driver for that chip.
#![no_std]

use esp_hal::twai::Twai;
use esp_hal::Async;
use fcan_embassy::esp_twai::{from_twai, to_twai, EspTwai};
use fcan_embassy::{run_node, CanPort, Classic, EmbassyClock, Firmware, RunConfig};
use fcan_example_io_board::{gen, IoBoard};
use fcan_runtime_nostd::fcan_core::frame::Frame;
use fcan_runtime_nostd::fcan_core::id::NodeId;
use fcan_runtime_nostd::{ConfigError, Transmit};

/// The io-board firmware, as the loop drives it.
pub struct Board(pub IoBoard);

impl Firmware for Board {
    fn receive(&mut self, frame: &Frame, now_us: u32) {
        self.0.receive(frame, now_us)
    }
    fn poll(&mut self, now_us: u32, tx: &mut impl Transmit) {
        self.0.poll(now_us, tx)
    }
    fn poll_at(&self, now_us: u32) -> Option<u32> {
        self.0.node.poll_at(now_us)
    }
}

/// The board for a TWAI port: `Controller::Classic`.
pub fn board(node_id: NodeId, boot_id: u32) -> Result<Board, ConfigError> {
    IoBoard::new(gen::Config {
        node_id,
        boot_id,
        counts: gen::Counts::MAX,
        controller: <Classic<EspTwai<'static>> as CanPort>::CONTROLLER,
    })
    .map(Board)
}

/// What an ESP32-C3 firmware's node task would run: the loop over the started TWAI
/// (`TwaiConfiguration::new(..).into_async().start()`), for good.
pub async fn node_task(board: &mut Board, twai: Twai<'static, Async>) -> ! {
    run_node(
        board,
        Classic(EspTwai::new(twai)),
        EmbassyClock,
        RunConfig::default(),
    )
    .await
}

/// The conversion both ways, instantiated for this chip's frame type.
pub fn round_trip(frame: &fcan_embassy::convert::ClassicFrame) -> Option<Frame> {
    from_twai(&to_twai(frame)?)
}
