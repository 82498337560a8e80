//! Missions: a dispatch becomes a run of its objective in an instance, and
//! every step of it an event in the log (then on the WebSocket).
//!
//! Each state change goes through the store's checked transition with the
//! event that reports it; the link is told to deliver after every append.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use warden_core::confine::Isolation;
use warden_core::{FailureKind, MissionId, MissionState, Outcome, Timestamp};
use warden_exec::dirwatch::DirWatch;
use warden_exec::shim::{Launch, Launched, ShimFiles, ShimLauncher, ShimStatus};
use warden_store::{Dispatched, MissionRecord, MissionUpdate, Resume, Store, StoreError};

use crate::link::Link;
use crate::wire::{AbortedBy, DispatchPayload, DispatchResponse, Event, Inbound};
use warden_core::{LastLine, PromptWatch};

/// Where and how a mission's objective runs.
#[derive(Debug, Clone)]
pub struct MissionTarget {
    pub instance: String,
    pub cwd: PathBuf,
    pub isolation: Isolation,
    pub timeout: Duration,
    pub max_output: u64,
    /// Why the instance's tier cannot run work now (e.g. the confined tier
    /// is not certified): the dispatch is refused with 503.
    pub refusal: Option<String>,
}

/// Finds the instance a dispatch names (`None`: the default one); the error
/// says why there is none.
pub type Resolve = Arc<dyn Fn(Option<&str>) -> Result<MissionTarget, String> + Send + Sync>;

/// Why a dispatch was refused, with the status it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DispatchError {
    BadRequest(String),
    UnknownInstance(String),
    /// The same `mission_id` with another body.
    Conflict(String),
    Unavailable(String),
    /// The run could not start: the mission failed, `mission.failed` sent.
    Dispatcher(String),
}

impl DispatchError {
    pub fn status(&self) -> u16 {
        match self {
            Self::BadRequest(_) => 400,
            Self::UnknownInstance(_) => 404,
            Self::Conflict(_) => 409,
            Self::Unavailable(_) => 503,
            Self::Dispatcher(_) => 500,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => "invalid_dispatch",
            Self::UnknownInstance(_) => "unknown_instance",
            Self::Conflict(_) => "mission_conflict",
            Self::Unavailable(_) => "unavailable",
            Self::Dispatcher(_) => "dispatch_failed",
        }
    }

    pub fn message(&self) -> String {
        match self {
            Self::BadRequest(m)
            | Self::UnknownInstance(m)
            | Self::Conflict(m)
            | Self::Unavailable(m)
            | Self::Dispatcher(m) => m.clone(),
        }
    }
}

/// What an abort request found.
#[derive(Debug, Clone)]
pub enum Abort {
    /// Already over: nothing to do.
    Ended(MissionRecord),
    /// Its run is being stopped; `mission.aborted` follows.
    Aborting(MissionRecord),
    /// Not running under this server now (suspended, or not started).
    NotRunning(MissionRecord),
}

/// How many events `GET /api/v1/missions/{id}` returns.
pub const RECENT_EVENTS: u32 = 50;

/// How many shims the liveness sweep looks at a second.
const SWEEP_PER_SECOND: usize = 1000;

/// At most one `mission.progress` a second while output flows.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The mission service.
pub struct Missions {
    store: Store,
    link: Arc<Link>,
    launcher: ShimLauncher,
    /// Where the missions' run directories are (`WARDEN_HOME/missions`).
    runs_dir: PathBuf,
    resolve: Resolve,
    /// The shims of missions being watched.
    live: Mutex<HashMap<MissionId, Live>>,
    /// Stops the watchers when the server goes down (the shims go on).
    stop: CancellationToken,
    /// The watchers (and dispatches under way), so shutdown waits for each
    /// to put down what it was recording before the missions are suspended.
    watchers: TaskTracker,
    /// Taken by a resume and by the shutdown: one at a time.
    suspending: tokio::sync::Mutex<()>,
    /// Missions an operator asked to abort.
    aborting: Mutex<HashSet<MissionId>>,
    /// The open prompt of each mission waiting for a human: its id.
    prompts: Mutex<HashMap<MissionId, String>>,
}

/// A mission whose shim is being watched.
#[derive(Clone)]
struct Live {
    shim: Launched,
    dir: PathBuf,
    /// Wakes its watcher (its shim died, or it was resumed).
    wake: Arc<Notify>,
    /// How far its output has been read and acted on (the store keeps it
    /// with each progress and the suspension; the next server reads on
    /// from there).
    scanned: Arc<AtomicU64>,
    /// Re-attached after a restart and not resumed yet: its output waits
    /// (no progress or prompt of a suspended mission is reported; if it
    /// ends meanwhile, its last line and real end are).
    held: Arc<AtomicBool>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn store_down(e: StoreError) -> DispatchError {
    DispatchError::Unavailable(format!("the mission store is unavailable: {e}"))
}

impl Missions {
    pub fn new(
        store: Store,
        link: Arc<Link>,
        launcher: ShimLauncher,
        runs_dir: PathBuf,
        resolve: Resolve,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            link,
            launcher,
            runs_dir,
            resolve,
            stop: CancellationToken::new(),
            watchers: TaskTracker::new(),
            suspending: tokio::sync::Mutex::new(()),
            live: Mutex::new(HashMap::new()),
            aborting: Mutex::new(HashSet::new()),
            prompts: Mutex::new(HashMap::new()),
        })
    }

    /// Routes the link's inbound events here, and has each new connection
    /// resume the suspended missions.
    pub fn listen(self: &Arc<Self>) {
        self.sweep();
        let resumer = Arc::downgrade(self);
        self.link.on_connect(Arc::new(move || {
            let this = resumer.upgrade();
            Box::pin(async move {
                if let Some(this) = this
                    && let Err(e) = this.resume_suspended().await
                {
                    tracing::error!(error = %e, "cannot resume suspended missions");
                }
            })
        }));
        let this = Arc::downgrade(self);
        self.link.on_inbound(Arc::new(move |event| {
            if let (
                Some(this),
                Inbound::HitlResponded {
                    mission_id,
                    hitl_id,
                    text,
                },
            ) = (this.upgrade(), event)
            {
                tokio::spawn(async move {
                    if let Err(why) = this.answer(mission_id.as_deref(), &hitl_id, &text).await {
                        tracing::warn!(%hitl_id, %why, "an answer from aiwg serve was refused");
                    }
                });
            }
        }));
    }

    /// Answers the open prompt `hitl_id` (of `mission`, when named): the
    /// text and a newline go to the run's terminal, the mission runs again.
    pub async fn answer(
        &self,
        mission: Option<&str>,
        hitl_id: &str,
        text: &str,
    ) -> Result<MissionId, String> {
        // The same checks as every other route that answers a prompt.
        warden_core::prompt::check_answer(text).map_err(|(_, why)| why)?;
        // Claimed atomically: a second answer finds no prompt.
        let (id, dir) = {
            let mut prompts = lock(&self.prompts);
            let Some(id) = prompts
                .iter()
                .find(|(m, h)| h.as_str() == hitl_id && mission.is_none_or(|n| m.as_str() == n))
                .map(|(m, _)| m.clone())
            else {
                return Err(format!("no open prompt {hitl_id}"));
            };
            let Some(live) = lock(&self.live).get(&id).cloned() else {
                return Err(format!("mission {id} has no live run"));
            };
            if live.held.load(Ordering::Acquire) {
                return Err(format!(
                    "mission {id} is suspended; its prompt can be answered once it is resumed"
                ));
            }
            prompts.remove(&id);
            (id, live.dir)
        };
        let _ = std::fs::remove_file(prompt_file(&dir));
        warden_exec::shim::write_stdin(&dir, format!("{text}\n").as_bytes())
            .map_err(|e| format!("writing the answer to mission {id}: {e}"))?;
        let event = Event::Progress {
            phase: "execution".into(),
            iteration: 0,
            summary: format!("answered prompt {hitl_id}"),
        };
        let env = self.envelope(&id, &event);
        let only_waiting = MissionUpdate {
            only_from: Some(MissionState::HitlRequired),
            ..MissionUpdate::default()
        };
        self.store
            .transition_mission(
                id.clone(),
                MissionState::Running,
                only_waiting,
                (event.name().into(), env),
            )
            .await
            .map_err(|e| e.to_string())?;
        self.link.events_appended();
        Ok(id)
    }

    /// A prompt appeared in the output: offered as `mission.hitl_required`
    /// (a new id for each new prompt), the mission waits for a human.
    async fn raise(&self, id: &MissionId, prompt: String, context: &str) {
        let hitl_id = format!("hitl-{}", uuid::Uuid::now_v7());
        let prompt_text = prompt.clone();
        let event = Event::HitlRequired {
            hitl_id: hitl_id.clone(),
            prompt,
            context: (!context.is_empty()).then(|| context.to_owned()),
            expires_at: None,
        };
        let env = self.envelope(id, &event);
        let to = match self.store.mission(id.clone()).await {
            Ok(rec) if rec.state == MissionState::HitlRequired => None,
            _ => Some(MissionState::HitlRequired),
        };
        let saved = match to {
            Some(to) => {
                self.store
                    .transition_mission(
                        id.clone(),
                        to,
                        MissionUpdate::default(),
                        (event.name().into(), env),
                    )
                    .await
            }
            None => {
                self.store
                    .append_mission_event(id.clone(), event.name().into(), env)
                    .await
            }
        };
        match saved {
            Ok(_) => {
                // Kept beside the run, so the prompt outlives a restart.
                if let Some(dir) = self.dir_of(id) {
                    let open =
                        json!({"hitl_id": hitl_id, "prompt": prompt_text, "context": context});
                    if let Err(e) = std::fs::write(prompt_file(&dir), open.to_string()) {
                        tracing::warn!(mission = %id, error = %e, "cannot keep the open prompt");
                    }
                }
                lock(&self.prompts).insert(id.clone(), hitl_id);
                self.link.events_appended();
            }
            Err(e) => tracing::warn!(mission = %id, error = %e, "cannot record a prompt"),
        }
    }

    /// More output after a prompt: nobody answered it, it is no longer
    /// what the program waits for.
    async fn withdraw(&self, id: &MissionId, chunks: u64, last_line: &str) {
        if lock(&self.prompts).remove(id).is_none() {
            return;
        }
        if let Some(dir) = self.dir_of(id) {
            let _ = std::fs::remove_file(prompt_file(&dir));
        }
        let event = Event::Progress {
            phase: "execution".into(),
            iteration: chunks,
            summary: last_line.to_owned(),
        };
        let env = self.envelope(id, &event);
        match self
            .store
            .transition_mission(
                id.clone(),
                MissionState::Running,
                MissionUpdate {
                    only_from: Some(MissionState::HitlRequired),
                    ..MissionUpdate::default()
                },
                (event.name().into(), env),
            )
            .await
        {
            Ok(_) => self.link.events_appended(),
            Err(e) => tracing::warn!(mission = %id, error = %e, "cannot record a withdrawn prompt"),
        }
    }

    /// The run directory of a watched mission.
    fn dir_of(&self, id: &MissionId) -> Option<PathBuf> {
        lock(&self.live).get(id).map(|l| l.dir.clone())
    }

    fn envelope(&self, id: &MissionId, event: &Event) -> Value {
        event.envelope(self.link.executor_id(), Some(id), Timestamp::now())
    }

    /// Moves the mission and logs `event` with it, then wakes the link.
    async fn transition(
        &self,
        id: &MissionId,
        event: Event,
        update: MissionUpdate,
    ) -> Result<(), StoreError> {
        let Some(to) = event.state() else {
            return self.append(id, event).await;
        };
        let env = self.envelope(id, &event);
        self.store
            .transition_mission(id.clone(), to, update, (event.name().into(), env))
            .await?;
        self.link.events_appended();
        Ok(())
    }

    /// Logs an event that changes no state, then wakes the link.
    async fn append(&self, id: &MissionId, event: Event) -> Result<(), StoreError> {
        let env = self.envelope(id, &event);
        self.store
            .append_mission_event(id.clone(), event.name().into(), env)
            .await?;
        self.link.events_appended();
        Ok(())
    }

    /// Accepts a dispatch: records the mission, starts its run, answers.
    pub async fn dispatch(
        self: &Arc<Self>,
        session: &str,
        body: DispatchPayload,
    ) -> Result<DispatchResponse, DispatchError> {
        body.validate().map_err(DispatchError::BadRequest)?;
        // Shutdown waits for a dispatch under way (its launch included).
        let _busy = self.watchers.token();
        if self.stop.is_cancelled() {
            return Err(DispatchError::Unavailable(
                "this executor is shutting down; its missions are being suspended".into(),
            ));
        }
        // A named instance that is not here is unknown (404); no default
        // instance to fall back on is this executor's lack (503).
        let target = (self.resolve)(body.instance()).map_err(|e| match body.instance() {
            Some(_) => DispatchError::UnknownInstance(e),
            None => DispatchError::Unavailable(format!(
                "{e}: name an instance in executor_filter.agent_id"
            )),
        })?;
        if let Some(why) = &target.refusal {
            return Err(DispatchError::Unavailable(why.clone()));
        }
        let rec = MissionRecord {
            long_running: body.long_running,
            metadata: body.metadata.clone().map_or(json!({}), Value::Object),
            ..MissionRecord::assigned(
                body.mission_id.clone(),
                session.to_owned(),
                target.instance.clone(),
                body.objective.clone(),
                body.completion.clone(),
                format!("ckpt-{}", uuid::Uuid::now_v7()),
            )
        };
        let now = rec.created_at;
        let answer = DispatchResponse {
            mission_id: body.mission_id.to_string(),
            executor_id: self.link.executor_id().to_owned(),
            status: "assigned",
            estimated_start: now.to_string(),
        };
        let assigned = self.envelope(
            &rec.id,
            &Event::Assigned {
                estimated_start: now,
            },
        );
        match self.store.dispatch_mission(rec.clone(), assigned).await {
            Ok(Dispatched::Created(_)) => self.link.events_appended(),
            Ok(Dispatched::Existing(old)) => {
                // A retried dispatch: the same mission is not started again.
                let same = old.objective == rec.objective
                    && old.completion == rec.completion
                    && old.instance == rec.instance
                    && old.session_id == rec.session_id;
                if !same {
                    return Err(DispatchError::Conflict(format!(
                        "mission {} was dispatched before with another body (it is {})",
                        rec.id, old.state
                    )));
                }
                return Ok(DispatchResponse {
                    estimated_start: old.created_at.to_string(),
                    ..answer
                });
            }
            Err(e) => return Err(store_down(e)),
        }
        let metadata = rec.metadata.to_string();
        let env = vec![
            ("AIWG_MISSION_ID".to_owned(), rec.id.to_string()),
            (
                "AIWG_MISSION_COMPLETION".to_owned(),
                body.completion.clone(),
            ),
            ("AIWG_MISSION_SESSION_ID".to_owned(), session.to_owned()),
            ("AIWG_MISSION_METADATA".to_owned(), metadata),
        ];
        let argv = vec!["sh".to_owned(), "-c".to_owned(), body.objective.clone()];
        // Named by the checkpoint id: mission ids are the orchestrator's
        // and may hold any character.
        let dir = self.runs_dir.join(&rec.checkpoint_id);
        let policy = match &target.isolation {
            Isolation::Confined(p) => Some(p),
            _ => None,
        };
        let launched = self
            .launcher
            .launch(&Launch {
                dir: &dir,
                argv: &argv,
                cwd: &target.cwd,
                env: &env,
                timeout: target.timeout,
                confine: policy,
                max_output: target.max_output,
                marker: &format!("mission-{}", rec.checkpoint_id),
            })
            .await;
        let launched = match launched {
            Ok(l) => l,
            Err(e) => {
                let error = format!("the mission's shim could not start: {e}");
                let failed = Event::Failed {
                    reason: "dispatch_failed".into(),
                    error: Some(error.clone()),
                    exit_code: None,
                };
                let update = MissionUpdate {
                    error: Some(error.clone()),
                    ..MissionUpdate::default()
                };
                self.transition(&rec.id, failed, update)
                    .await
                    .map_err(store_down)?;
                return Err(DispatchError::Dispatcher(format!(
                    "mission {}: {error}",
                    rec.id
                )));
            }
        };
        let started_event = Event::Started {
            agent_runtime: "command".into(),
            pty_session_id: Some(rec.checkpoint_id.clone()),
        };
        let update = MissionUpdate {
            run_dir: Some(dir.display().to_string()),
            shim: Some((launched.pid, launched.start)),
            ..MissionUpdate::default()
        };
        if let Err(e) = self.transition(&rec.id, started_event, update).await {
            ShimLauncher::stop(launched);
            return Err(store_down(e));
        }
        self.attach(rec.id.clone(), launched, dir, 0, false);
        Ok(answer)
    }

    /// Watches a mission's shim from output offset `offset`; `held`: a
    /// suspended mission's output is read only once it is resumed.
    fn attach(
        self: &Arc<Self>,
        id: MissionId,
        shim: Launched,
        dir: PathBuf,
        offset: u64,
        held: bool,
    ) {
        let live = Live {
            shim,
            dir,
            wake: Arc::new(Notify::new()),
            scanned: Arc::new(AtomicU64::new(offset)),
            held: Arc::new(AtomicBool::new(held)),
        };
        lock(&self.live).insert(id.clone(), live.clone());
        let this = Arc::clone(self);
        self.watchers
            .spawn(async move { this.watch(id, live).await });
    }

    /// Follows a mission's shim: progress and prompts while output flows,
    /// then its end. Returns without recording anything when the server
    /// stops (the mission is suspended, its shim goes on).
    async fn watch(self: Arc<Self>, id: MissionId, live: Live) {
        let Live {
            shim,
            dir,
            wake,
            scanned,
            held,
        } = live;
        let mut offset = scanned.load(Ordering::Acquire);
        let mut chunks: u64 = 0;
        let mut last_line = String::new();
        let mut prompts = PromptWatch::default();
        // Read on from the middle of the output (after a restart): the
        // detector first sees what came just before, unreported, so a line
        // cut at the offset is judged whole.
        if offset > 0 {
            let start = offset.saturating_sub(warden_core::prompt::PROMPT_WINDOW as u64);
            let _ = prompts.push(&read_range(&ShimFiles::output(&dir), start, offset));
        }
        // The prompt text last offered (one kept from before a restart
        // too), so a repeat is not a new prompt.
        let mut offered: Option<String> = open_prompt(&dir).map(|(_, p, _)| p);
        let mut last_sent: Option<Instant> = None;
        let mut unsent = false;
        let dirwatch = self.launcher.watcher.watch(&dir).ok();
        let mut was_held = held.load(Ordering::Acquire);
        let outcome = loop {
            // The server is going down: the mission is suspended, not ended
            // (what was read is reported first).
            if self.stop.is_cancelled() {
                if unsent {
                    self.progress(&id, chunks, &last_line, Some(offset)).await;
                }
                return;
            }
            let data = if held.load(Ordering::Acquire) {
                Vec::new()
            } else {
                if was_held {
                    // Resumed: its prompt was offered again or dropped.
                    was_held = false;
                    offered = open_prompt(&dir).map(|(_, p, _)| p);
                }
                read_from(&ShimFiles::output(&dir), &mut offset)
            };
            if !data.is_empty() {
                chunks += 1;
                if let Some(line) = last_line_of(&data) {
                    last_line = line;
                }
                match prompts.push(&data) {
                    LastLine::Prompt(p) => {
                        if offered.as_ref() != Some(&p) {
                            offered = Some(p.clone());
                            self.raise(&id, p, &last_line).await;
                        }
                    }
                    LastLine::Output => {
                        offered = None;
                        self.withdraw(&id, chunks, &last_line).await;
                    }
                    LastLine::Restricted(p) => {
                        tracing::info!(mission = %id, prompt = %p, "a prompt for a secret is not offered");
                    }
                }
                // Acted on: a restart reads on from here.
                scanned.store(offset, Ordering::Release);
                let due = last_sent.map(|t| t + PROGRESS_EVERY);
                if due.is_none_or(|d| Instant::now() >= d) {
                    self.progress(&id, chunks, &last_line, Some(offset)).await;
                    last_sent = Some(Instant::now());
                    unsent = false;
                } else {
                    unsent = true;
                }
                continue;
            }
            if let Some(outcome) = shim_outcome(&dir, shim) {
                // What the program printed last is read before the end.
                let rest = read_from(&ShimFiles::output(&dir), &mut offset);
                if let Some(line) = last_line_of(&rest) {
                    last_line = line;
                    unsent = true;
                }
                break outcome;
            }
            let next_due = last_sent.map(|t| t + PROGRESS_EVERY);
            tokio::select! {
                () = changed(dirwatch.as_ref()) => {}
                // Its shim died (the liveness sweep), or it was resumed.
                () = wake.notified() => {}
                () = sleep_until(next_due), if unsent => {
                    self.progress(&id, chunks, &last_line, Some(offset)).await;
                    last_sent = Some(Instant::now());
                    unsent = false;
                }
                () = self.stop.cancelled() => {
                    // What was read is reported before the suspension.
                    if unsent {
                        self.progress(&id, chunks, &last_line, Some(offset)).await;
                    }
                    return;
                }
            }
        };
        // The contract wants at least one progress before the end.
        if unsent || last_sent.is_none() {
            self.progress(&id, chunks, &last_line, Some(offset)).await;
        }
        self.finish(&id, &outcome, &last_line).await;
    }

    /// Records the end of a mission nobody is watching now (it ended while
    /// the server was down, or as it stops): its last output line as a
    /// progress (the contract wants one before the end), then the end.
    async fn end_from_files(&self, id: &MissionId, dir: &Path, outcome: &Outcome) {
        let output = ShimFiles::output(dir);
        let len = std::fs::metadata(&output).map_or(0, |m| m.len());
        let tail = read_range(
            &output,
            len.saturating_sub(warden_core::prompt::PROMPT_WINDOW as u64),
            len,
        );
        let last = last_line_of(&tail).unwrap_or_default();
        self.progress(id, 0, &last, None).await;
        self.finish(id, outcome, &last).await;
    }

    /// Records a mission's end and stops watching it.
    async fn finish(&self, id: &MissionId, outcome: &Outcome, last_line: &str) {
        lock(&self.prompts).remove(id);
        let aborted = lock(&self.aborting).remove(id);
        let (event, update) = ending(outcome, aborted, last_line);
        if let Err(e) = self.transition(id, event, update).await {
            tracing::error!(mission = %id, error = %e, "cannot record how a mission ended");
        }
        lock(&self.live).remove(id);
    }

    /// At start: every mission the last server left is checked for the
    /// truth. Ended while the server was down: its real end is recorded.
    /// Shim still alive (same pid and start time): watched again, its
    /// output read on from where the last server stopped once it is
    /// resumed. Neither: failed, its shim is gone.
    pub async fn recover(self: &Arc<Self>) -> Result<(), StoreError> {
        for m in self.store.active_missions().await? {
            let (Some(dir), Some((pid, start))) = (m.run_dir.as_ref().map(PathBuf::from), m.shim)
            else {
                let outcome = Outcome::infrastructure(
                    "server_restart",
                    Some("the server stopped before the mission's run started".into()),
                );
                self.finish(&m.id, &outcome, "").await;
                continue;
            };
            let shim = Launched { pid, start };
            if let Some(outcome) = shim_outcome(&dir, shim) {
                self.end_from_files(&m.id, &dir, &outcome).await;
                continue;
            }
            let len = std::fs::metadata(ShimFiles::output(&dir)).map_or(0, |m| m.len());
            let held = m.state == MissionState::Suspended;
            // Read on from what was last reported (kept with each progress
            // and with the suspension), after a crash too: nothing is
            // reported twice or skipped.
            let offset = m.scanned.unwrap_or(0).min(len);
            // A prompt still open when the last server stopped stays open.
            if let Some((hitl_id, _, _)) = open_prompt(&dir) {
                lock(&self.prompts).insert(m.id.clone(), hitl_id);
            }
            self.attach(m.id.clone(), shim, dir, offset, held);
        }
        Ok(())
    }

    /// Wakes the watcher of each mission whose shim died (a shim killed
    /// outright leaves no status file for inotify to see). At most
    /// [`SWEEP_PER_SECOND`] shims are looked at a second, so with many
    /// missions each one is looked at less often (every 10 s with 10,000).
    fn sweep(self: &Arc<Self>) {
        let this = Arc::downgrade(self);
        let stop = self.stop.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            let mut cursor = 0;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = stop.cancelled() => return,
                }
                let Some(mut all) = this.upgrade().map(|t| {
                    lock(&t.live)
                        .iter()
                        .map(|(id, l)| (id.clone(), l.shim, Arc::clone(&l.wake)))
                        .collect::<Vec<_>>()
                }) else {
                    return;
                };
                // A stable order, so the cursor goes round every mission.
                all.sort_unstable_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
                if cursor >= all.len() {
                    cursor = 0;
                }
                let live: Vec<_> = all
                    .into_iter()
                    .skip(cursor)
                    .take(SWEEP_PER_SECOND)
                    .collect();
                cursor += live.len();
                // Thousands of /proc reads: off the runtime's threads.
                let _ = tokio::task::spawn_blocking(move || {
                    for (_, shim, wake) in live {
                        if !warden_exec::shim::process_alive(shim.pid, shim.start) {
                            wake.notify_one();
                        }
                    }
                })
                .await;
            }
        });
    }

    /// The server is going down: watchers stop, every live mission is
    /// `suspended` (its shim goes on), one that just ended gets its end.
    /// How far each one's output was read is kept beside its run.
    pub async fn suspend_all(&self) -> Result<(), StoreError> {
        self.stop.cancel();
        // A resume under way commits first (and a later one does nothing).
        let _turn = self.suspending.lock().await;
        // Each watcher finishes what it was recording (a prompt, a
        // progress, an end) first: nothing of a mission follows its
        // `mission.suspended`, and the marks below are what was reported.
        self.watchers.close();
        if tokio::time::timeout(Duration::from_secs(10), self.watchers.wait())
            .await
            .is_err()
        {
            tracing::warn!("mission watchers still busy after 10 s; suspending anyway");
        }
        for m in self.store.active_missions().await? {
            let shim = m.shim.map(|(pid, start)| Launched { pid, start });
            if let (Some(dir), Some(shim)) = (&m.run_dir, shim)
                && let Some(outcome) = shim_outcome(Path::new(dir), shim)
            {
                self.end_from_files(&m.id, Path::new(dir), &outcome).await;
                continue;
            }
            if matches!(m.state, MissionState::Running | MissionState::HitlRequired) {
                let event = Event::Suspended {
                    checkpoint_id: m.checkpoint_id.clone(),
                    reason: "mgmt_server_shutdown".into(),
                };
                // How far its output was read and reported, kept with it.
                let update = MissionUpdate {
                    scanned: lock(&self.live)
                        .get(&m.id)
                        .map(|l| l.scanned.load(Ordering::Acquire)),
                    ..MissionUpdate::default()
                };
                self.transition(&m.id, event, update).await?;
            }
        }
        Ok(())
    }

    /// On every new connection, after the resync: each suspended mission
    /// whose shim is being watched again is `reconnected` (its checkpoint)
    /// and `resumed` (and its prompt offered again if the program still
    /// waits on it), all logged in one transaction (and so delivered, in
    /// order, even if this connection drops first). Then their output is
    /// read on from where the last server stopped.
    pub async fn resume_suspended(&self) -> Result<(), StoreError> {
        // Not both at once with `suspend_all`; and once going down, its
        // watchers are gone: nothing can be resumed.
        let _turn = self.suspending.lock().await;
        if self.stop.is_cancelled() {
            return Ok(());
        }
        let mut batch = Vec::new();
        let mut woken = HashMap::new();
        let mut dropped = Vec::new();
        for m in self.store.active_missions().await? {
            if m.state != MissionState::Suspended {
                continue;
            }
            let Some(live) = lock(&self.live).get(&m.id).cloned() else {
                continue;
            };
            let reconnected = Event::Reconnected {
                checkpoint_id: m.checkpoint_id.clone(),
            };
            let mut events = vec![
                (
                    reconnected.name().to_owned(),
                    self.envelope(&m.id, &reconnected),
                ),
                (
                    Event::Resumed.name().to_owned(),
                    self.envelope(&m.id, &Event::Resumed),
                ),
            ];
            let mut to = MissionState::Running;
            // Waiting for a human when it was suspended, and nothing
            // printed since: offered again under the same id (an answer to
            // it still counts). Output since: read on, it decides.
            if let Some((hitl_id, prompt, context)) = open_prompt(&live.dir) {
                let len = std::fs::metadata(ShimFiles::output(&live.dir)).map_or(0, |m| m.len());
                let still = lock(&self.prompts).get(&m.id) == Some(&hitl_id)
                    && len == live.scanned.load(Ordering::Acquire);
                if still {
                    let event = Event::HitlRequired {
                        hitl_id,
                        prompt,
                        context,
                        expires_at: None,
                    };
                    events.push((event.name().to_owned(), self.envelope(&m.id, &event)));
                    to = MissionState::HitlRequired;
                } else {
                    dropped.push(m.id.clone());
                }
            }
            batch.push(Resume {
                id: m.id.clone(),
                events,
                to,
            });
            woken.insert(m.id.clone(), live);
        }
        if batch.is_empty() {
            return Ok(());
        }
        let resumed = self.store.resume_missions(batch).await?;
        self.link.events_appended();
        for id in &resumed {
            let Some(live) = woken.get(id) else { continue };
            if dropped.contains(id) {
                lock(&self.prompts).remove(id);
                let _ = std::fs::remove_file(prompt_file(&live.dir));
            }
            live.held.store(false, Ordering::Release);
            live.wake.notify_one();
        }
        tracing::info!(missions = resumed.len(), "suspended missions resumed");
        Ok(())
    }

    /// Logs a `mission.progress`; with `scanned`, also that the output up
    /// to there has been reported (a restart reads on from it).
    async fn progress(&self, id: &MissionId, chunks: u64, last_line: &str, scanned: Option<u64>) {
        let event = Event::Progress {
            phase: "execution".into(),
            iteration: chunks,
            summary: last_line.to_owned(),
        };
        let saved = match scanned {
            Some(n) => {
                let env = self.envelope(id, &event);
                self.store
                    .record_progress(id.clone(), n, (event.name().into(), env))
                    .await
                    .map(|_| self.link.events_appended())
            }
            None => self.append(id, event).await,
        };
        if let Err(e) = saved {
            tracing::warn!(mission = %id, error = %e, "cannot record mission progress");
        }
    }

    /// An operator's kill: the run is stopped and the mission ends
    /// `aborted` once its processes are gone.
    pub async fn abort(&self, id: MissionId) -> Result<Abort, StoreError> {
        let rec = self.store.mission(id.clone()).await?;
        if rec.state.is_terminal() {
            return Ok(Abort::Ended(rec));
        }
        // Suspended missions resume first (the diagram has no arrow from
        // suspended to aborted); one not watched here cannot be stopped.
        let shim = lock(&self.live).get(&id).map(|l| l.shim);
        match shim {
            Some(shim) if rec.state != MissionState::Suspended => {
                lock(&self.aborting).insert(id);
                ShimLauncher::stop(shim);
                Ok(Abort::Aborting(rec))
            }
            _ => Ok(Abort::NotRunning(rec)),
        }
    }

    /// The newest missions (only those not ended when `active`), one
    /// summary each: id, state, instance, objective, times, end.
    pub async fn list(&self, active: bool, limit: u32) -> Result<Vec<Value>, StoreError> {
        let missions = self.store.list_missions(active, limit).await?;
        Ok(missions
            .into_iter()
            .map(|m| {
                json!({
                    "mission_id": m.id.to_string(),
                    "state": m.state.as_str(),
                    "instance": m.instance,
                    "session_id": m.session_id,
                    "objective": m.objective,
                    "created_at": m.created_at.to_string(),
                    "updated_at": m.updated_at.to_string(),
                    "completed_at": m.completed_at.map(|t| t.to_string()),
                    "exit_code": m.exit_code,
                    "error": m.error,
                })
            })
            .collect())
    }

    /// `GET /api/v1/missions/{id}`: the contract's `MissionStatusResponse`.
    pub async fn status(&self, id: MissionId) -> Result<Value, StoreError> {
        let rec = self.store.mission(id.clone()).await?;
        let events: Vec<Value> = self
            .store
            .recent_mission_events(id, RECENT_EVENTS)
            .await?
            .into_iter()
            .map(|e| e.envelope)
            .collect();
        let mut v = json!({
            "mission_id": rec.id.to_string(),
            "executor_id": self.link.executor_id(),
            "state": rec.state.as_str(),
            "created_at": rec.created_at.to_string(),
            "updated_at": rec.updated_at.to_string(),
            "recent_events": events,
        });
        if let Some(t) = rec.completed_at {
            v["completed_at"] = json!(t.to_string());
        }
        if let Some(c) = rec.exit_code {
            v["exit_code"] = json!(c);
        }
        if let Some(e) = rec.error {
            v["error"] = json!(e);
        }
        Ok(v)
    }
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// The last non-empty line of a chunk, trimmed to 200 characters.
fn last_line_of(data: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(data);
    let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(200).collect())
}

/// The terminal event for a run's outcome.
fn ending(outcome: &Outcome, aborted: bool, last_line: &str) -> (Event, MissionUpdate) {
    let summary = (!last_line.is_empty()).then(|| last_line.to_owned());
    let failed = |reason: &str, exit_code: Option<i32>| {
        let error = outcome.describe();
        (
            Event::Failed {
                reason: reason.into(),
                error: Some(error.clone()),
                exit_code,
            },
            MissionUpdate {
                exit_code,
                error: Some(error),
                ..MissionUpdate::default()
            },
        )
    };
    match outcome {
        Outcome::Completed => (
            Event::Completed {
                exit_code: Some(0),
                summary,
            },
            MissionUpdate {
                exit_code: Some(0),
                ..MissionUpdate::default()
            },
        ),
        Outcome::Cancelled if aborted => (
            Event::Aborted {
                aborted_by: AbortedBy::Operator,
                reason: "an operator killed the mission; its processes are gone".into(),
            },
            MissionUpdate::default(),
        ),
        Outcome::Failed(FailureKind::Application {
            exit_code: Some(c), ..
        }) => failed("non_zero_exit", Some(*c)),
        Outcome::Failed(FailureKind::Application { .. }) => failed("signal", None),
        Outcome::Failed(FailureKind::Infrastructure { reason, .. }) => failed(reason, None),
        Outcome::TimedOut => failed("timeout", None),
        Outcome::OutputLimit => failed("output_limit", None),
        Outcome::Cancelled => failed("cancelled", None),
    }
}

/// The bytes of `path` from `start` up to `end`.
fn read_range(path: &Path, start: u64, end: u64) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut buf = Vec::new();
    if let Ok(mut f) = std::fs::File::open(path)
        && f.seek(SeekFrom::Start(start)).is_ok()
    {
        let _ = f.take(end.saturating_sub(start)).read_to_end(&mut buf);
    }
    buf
}

/// Reads what was appended to `path` since `offset` (and moves it).
fn read_from(path: &Path, offset: &mut u64) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(*offset)).is_ok() && f.read_to_end(&mut buf).is_ok() {
        *offset += buf.len() as u64;
    }
    buf
}

/// The next change in a run directory; without a watch (inotify refused
/// one), a look every second.
async fn changed(watch: Option<&DirWatch>) {
    match watch {
        Some(w) => w.changed().await,
        None => tokio::time::sleep(Duration::from_secs(1)).await,
    }
}

/// How the shim's run ended, if it did: its status file (and, for the
/// confined tier, the sandbox's setup record), or the shim gone without one.
fn shim_outcome(dir: &Path, shim: Launched) -> Option<Outcome> {
    let status = match warden_exec::shim::read_status(dir) {
        Some(s) => s,
        None if warden_exec::shim::process_alive(shim.pid, shim.start) => return None,
        // Gone: look once more, the status may have landed meanwhile.
        None => match warden_exec::shim::read_status(dir) {
            Some(s) => s,
            None => {
                return Some(Outcome::infrastructure(
                    "shim_lost",
                    Some("the mission's shim is gone and left no status".into()),
                ));
            }
        },
    };
    if let Some(Ok(warden_exec::confine::Record::Failed(f))) =
        warden_exec::confine::Record::read(&ShimFiles::setup(dir))
    {
        return Some(Outcome::infrastructure(f.reason, Some(f.detail)));
    }
    Some(match status {
        Ok(ShimStatus::Exited { code }) => Outcome::exit_code(code),
        Ok(ShimStatus::Signaled { signal }) => Outcome::signal(signal),
        Ok(ShimStatus::TimedOut) => Outcome::TimedOut,
        Ok(ShimStatus::OutputLimit) => Outcome::OutputLimit,
        Ok(ShimStatus::Cancelled) => Outcome::Cancelled,
        Ok(ShimStatus::NotStarted { error }) => {
            Outcome::infrastructure("program_not_started", Some(error))
        }
        Err(e) => Outcome::infrastructure("shim_status_unreadable", Some(e)),
    })
}

/// Where a run keeps its open prompt.
fn prompt_file(dir: &Path) -> PathBuf {
    dir.join("prompt.json")
}

/// The open prompt kept beside a run: id, text, context.
fn open_prompt(dir: &Path) -> Option<(String, String, Option<String>)> {
    let v: Value = serde_json::from_slice(&std::fs::read(prompt_file(dir)).ok()?).ok()?;
    Some((
        v["hitl_id"].as_str()?.to_owned(),
        v["prompt"].as_str()?.to_owned(),
        v["context"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(str::to_owned),
    ))
}
