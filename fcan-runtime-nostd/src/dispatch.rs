//! The application side of `poll`: the [`Dispatch`] trait generated code implements over
//! the application's typed handlers, and the calls into it that need the application's
//! [`Context`] (the parameter hook after a commit) and the events a life-cycle
//! transition asks for. Service handlers are run by
//! `config_plane`.

use crate::api::{Event, ServiceCall, ServiceOutcome};
use crate::context::Context;
use crate::desc::NodeDesc;
use crate::lifecycle::Effects;
use crate::state::Core;
use crate::storage::Parts;

/// The application side of `poll`: generated code implements it over the user's typed
/// handler traits, so a missing handler is a compile error.
///
/// Handlers get the node's [`Context`]: they read topics and parameters and publish as
/// the main loop does, while `poll` holds the node.
pub trait Dispatch {
    /// Runs a service handler. Write the packed response into `response` (which is at
    /// least the service's response size) and return `Done(len)`, or another outcome.
    fn service(
        &mut self,
        cx: &mut Context<'_>,
        call: ServiceCall<'_>,
        response: &mut [u8],
    ) -> ServiceOutcome;

    /// A batch of parameter writes ended (PARAM_SET with the commit bit); `changed` has
    /// bit `i` set for every param `i` of `block` written since the last commit.
    fn params_changed(&mut self, cx: &mut Context<'_>, block: u8, changed: u32);

    /// Something the application must react to.
    fn event(&mut self, event: Event);

    /// Where firmware updates over the bus are written: `None` (the default) refuses
    /// every offer as unsupported. Only with the runtime's `update` feature.
    #[cfg(feature = "update")]
    fn update(&mut self) -> Option<&mut dyn crate::update::Update> {
        None
    }
}

/// Calls `params_changed` for every block with params written since the last commit, and
/// clears the marks. Bit `i` of the mask is param `i` in schema declaration order.
pub(crate) fn commit_params(
    desc: &'static NodeDesc,
    core: &mut Core,
    p: &mut Parts<'_>,
    app: &mut impl Dispatch,
) {
    let (mut cx, rest) = Context::split(desc, core, p.reborrow());
    for (number, mask) in rest
        .param_changed
        .iter_mut()
        .take(desc.blocks.len().min(256))
        .enumerate()
    {
        let changed = core::mem::take(mask);
        if changed != 0 {
            app.params_changed(&mut cx, number as u8, changed);
        }
    }
}

/// Delivers the events of a life-cycle transition ([`Effects`]), in their order. Here,
/// with the application, so the life cycle and the core need not know it.
pub(crate) fn deliver(fx: Effects, app: &mut impl Dispatch) {
    for (flag, e) in Effects::EVENTS {
        if fx.has(flag) {
            app.event(e);
        }
    }
}
