//! Which layers a net keeps, by Caffe's `NetState` (phase, level, stages)
//! and each layer's `include`/`exclude` rules (`NetStateRule`): a rule is
//! met when every condition it names holds; a layer with include rules is
//! kept if one is met, a layer without them unless an exclude rule is met.
//! It owns the phase, the state and that decision only; it must never read
//! files.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Train,
    Test,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Train => "TRAIN",
            Phase::Test => "TEST",
        }
    }
}

/// The state a net is built for (Caffe's `NetState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetState {
    pub phase: Phase,
    pub level: i32,
    pub stages: Vec<String>,
}

impl NetState {
    /// A phase with level 0 and no stage, Caffe's default.
    pub fn phase(phase: Phase) -> NetState {
        NetState { phase, level: 0, stages: Vec::new() }
    }
}

/// One `include` or `exclude` block (Caffe's `NetStateRule`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateRule {
    pub phase: Option<Phase>,
    pub min_level: Option<i32>,
    pub max_level: Option<i32>,
    /// Stages the state must all have.
    pub stages: Vec<String>,
    /// Stages the state must have none of.
    pub not_stages: Vec<String>,
}

impl StateRule {
    /// Caffe's StateMeetsRule.
    pub fn met_by(&self, s: &NetState) -> bool {
        self.phase.is_none_or(|p| p == s.phase)
            && self.min_level.is_none_or(|m| s.level >= m)
            && self.max_level.is_none_or(|m| s.level <= m)
            && self.stages.iter().all(|st| s.stages.contains(st))
            && !self.not_stages.iter().any(|st| s.stages.contains(st))
    }
}

/// Whether a layer with these rules is in the net for `state` (Caffe's FilterNet).
pub fn admits(include: &[StateRule], exclude: &[StateRule], state: &NetState) -> bool {
    if include.is_empty() {
        !exclude.iter().any(|r| r.met_by(state))
    } else {
        include.iter().any(|r| r.met_by(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stages(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn rules_follow_caffe() {
        let train = NetState::phase(Phase::Train);
        let deploy = NetState { phase: Phase::Test, level: 2, stages: stages(&["deploy", "fast"]) };
        let test_only = [StateRule { phase: Some(Phase::Test), ..StateRule::default() }];
        assert!(admits(&[], &[], &train));
        assert!(!admits(&test_only, &[], &train) && admits(&test_only, &[], &deploy));
        assert!(admits(&[], &test_only, &train) && !admits(&[], &test_only, &deploy));
        let staged = StateRule { stages: stages(&["deploy", "fast"]), ..StateRule::default() };
        assert!(staged.met_by(&deploy) && !staged.met_by(&train));
        let partly = StateRule { stages: stages(&["deploy", "slow"]), ..StateRule::default() };
        assert!(!partly.met_by(&deploy));
        let not_deploy = StateRule { not_stages: stages(&["deploy"]), ..StateRule::default() };
        assert!(not_deploy.met_by(&train) && !not_deploy.met_by(&deploy));
        let levels = StateRule { min_level: Some(1), max_level: Some(2), ..StateRule::default() };
        assert!(levels.met_by(&deploy) && !levels.met_by(&train));
        assert!(!StateRule { max_level: Some(1), ..StateRule::default() }.met_by(&deploy));
        // Any one include suffices.
        let train_rule = StateRule { phase: Some(Phase::Train), ..StateRule::default() };
        assert!(admits(&[partly, train_rule], &[], &train));
    }
}
