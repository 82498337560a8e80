//! The task engine: turns a client's message into a task, runs the
//! instance's runtime, and answers get, list and cancel from the store.
//! Everything a client is told has been saved first.

mod adapter_run;
mod command;
mod conformance;
mod echo;
mod prompts;

pub use prompts::{AnswerError, PendingPrompt};

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use warden_core::{
    Message, Part, Role, RunId, Task, TaskEvent, TaskId, TaskState, TaskStatus, Timestamp,
};
use warden_store::{Store, StoreError, TaskFilter};

use crate::instance::{Instance, Runtime};
use crate::jsonrpc::A2aError;
use crate::process::ProcessRunner;

/// How a send should answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendOptions {
    /// At most this many recent messages in the returned history (0: none).
    pub history_length: Option<usize>,
    /// Return at once (with the task as created) instead of waiting for a
    /// terminal or interrupted state.
    pub return_immediately: bool,
}

/// A page of tasks for `ListTasks`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListResult {
    /// The tasks, newest status first.
    pub tasks: Vec<Task>,
    /// Empty on the last page.
    pub next_page_token: String,
    /// The page size used.
    pub page_size: u32,
    /// How many tasks match, across all pages.
    pub total_size: u64,
}

/// The `ListTasks` parameters, already parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListQuery {
    /// The conversation filter, the state filter and the time filter.
    pub filter: TaskFilter,
    /// 1..=100, default 50.
    pub page_size: Option<u32>,
    /// From a previous answer.
    pub page_token: Option<String>,
    /// As in [`SendOptions`].
    pub history_length: Option<usize>,
    /// Artifacts are left out unless asked for.
    pub include_artifacts: bool,
}

/// What a send request carries besides its message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SendContext {
    /// The extensions the request activated that the instance supports.
    pub extensions: Vec<String>,
    /// The request's own metadata (an extension envelope may be there).
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What works a task: the instance's runtime, or an adapter command the
/// message asked for.
#[derive(Debug, Clone)]
enum Work {
    Runtime,
    Adapter(crate::adapter::AdapterCommand),
}

/// What a send answers with: usually the task, or for a runtime that
/// answers directly, a message (no task is created then).
#[derive(Debug, Clone, PartialEq)]
pub enum Sent {
    /// The task, as it ended or was interrupted (or at once, when asked).
    Task(Task),
    /// A direct answer.
    Message(Message),
}

/// How a streaming send starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Streamed {
    /// The task as recorded and the seq after which its events follow.
    Task(Task, u64),
    /// A direct answer: the stream is this one message.
    Message(Message),
}

/// A task being worked in this process.
struct LiveTask {
    /// The run working it, once started.
    run: Option<RunId>,
    /// Turns true when a client asks to cancel it.
    cancel: watch::Sender<bool>,
    /// Bumped each time its work pauses for the client (input required).
    interrupted: watch::Sender<u64>,
    /// Turns true when its work is over (its final state is saved or the
    /// attempt to save it has failed).
    done: watch::Receiver<bool>,
}

/// Watches one task's work.
struct WorkWatch {
    done: watch::Receiver<bool>,
    interrupted: watch::Receiver<u64>,
}

impl WorkWatch {
    async fn paused_or_over(&mut self) {
        tokio::select! {
            _ = self.done.wait_for(|d| *d) => {}
            _ = self.interrupted.changed() => {}
        }
    }

    fn over(&self) -> bool {
        *self.done.borrow()
    }
}

/// A message recorded on its task, with the task reserved for its work.
struct Admitted {
    /// The task as recorded.
    task: Task,
    /// The seq of that record's event.
    seq: u64,
    /// The message as stored (with its task and context ids).
    message: Message,
    guard: LiveGuard,
}

/// Removes a task from the live set when its work ends, however it ends.
struct LiveGuard {
    live: Arc<Mutex<HashMap<TaskId, LiveTask>>>,
    id: TaskId,
    done: watch::Sender<bool>,
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        lock(&self.live).remove(&self.id);
        let _ = self.done.send(true);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How long a cancel waits for a run's processes to be gone: the grace
/// period, the supervisor's 10 s SIGKILL limit, and a margin.
const CANCEL_WAIT_MARGIN: Duration = Duration::from_secs(15);

/// Runs tasks for the instances of one server.
#[derive(Clone)]
pub struct TaskEngine {
    store: Store,
    runner: Option<Arc<dyn ProcessRunner>>,
    /// The runner's SIGTERM → SIGKILL grace period.
    grace: Duration,
    live: Arc<Mutex<HashMap<TaskId, LiveTask>>>,
    /// Prompts waiting for an answer, by task.
    prompts: Arc<Mutex<HashMap<TaskId, PendingPrompt>>>,
    /// Raising a prompt and taking an answer happen one at a time: an
    /// answer seen right after the paused state is saved waits for the
    /// prompt to be listed, and never lands before the pause.
    prompt_gate: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for TaskEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskEngine")
            .field("runner", &self.runner.is_some())
            .finish_non_exhaustive()
    }
}

fn store_error(e: StoreError, task: &str) -> A2aError {
    if e.is_not_found() {
        return A2aError::TaskNotFound(task.to_owned());
    }
    tracing::error!(error = %e, task, "store failure answering an A2A request");
    A2aError::Internal
}

/// The refusal of a stream by an instance whose card says it has none.
fn no_streaming(instance: &Instance) -> A2aError {
    A2aError::UnsupportedOperation(format!(
        "instance {} does not offer streaming (its card says capabilities.streaming: false)",
        instance.name
    ))
}

/// A runtime's direct answer to `message`, when it gives one.
fn direct_reply(instance: &Instance, message: &Message) -> Option<Message> {
    if message.role != Role::User {
        return None;
    }
    match instance.runtime {
        Runtime::Conformance => conformance::direct_reply(message),
        _ => None,
    }
}

/// Keeps the last `n` messages (`Some(0)`: none; `None`: all).
pub fn trim_history(mut task: Task, n: Option<usize>) -> Task {
    if let Some(n) = n {
        let skip = task.history.len().saturating_sub(n);
        task.history.drain(..skip);
    }
    task
}

fn agent_message(task: TaskId, context_id: &str, parts: Vec<Part>) -> Message {
    Message {
        message_id: uuid::Uuid::now_v7().to_string(),
        context_id: Some(context_id.to_owned()),
        task_id: Some(task.to_string()),
        role: Role::Agent,
        parts,
        metadata: None,
        extensions: vec![],
        reference_task_ids: vec![],
    }
}

fn status(state: TaskState, message: Option<Message>) -> TaskStatus {
    TaskStatus {
        state,
        message,
        timestamp: Some(Timestamp::now()),
    }
}

impl TaskEngine {
    /// An engine over `store` that can run in-process runtimes only.
    pub fn new(store: Store) -> Self {
        Self {
            store,
            runner: None,
            grace: Duration::ZERO,
            live: Arc::default(),
            prompts: Arc::default(),
            prompt_gate: Arc::default(),
        }
    }

    /// Lets command runtimes start processes through `runner`, whose
    /// SIGTERM → SIGKILL grace period is `grace`.
    pub fn with_runner(mut self, runner: Arc<dyn ProcessRunner>, grace: Duration) -> Self {
        self.runner = Some(runner);
        self.grace = grace;
        self
    }

    /// Marks `id` as worked here until the returned guard drops; `None`
    /// when it already is (one piece of work per task at a time).
    fn hold(&self, id: TaskId) -> Option<LiveGuard> {
        let (done, rx) = watch::channel(false);
        let mut live = lock(&self.live);
        if live.contains_key(&id) {
            return None;
        }
        live.insert(
            id,
            LiveTask {
                run: None,
                cancel: watch::Sender::new(false),
                interrupted: watch::Sender::new(0),
                done: rx,
            },
        );
        Some(LiveGuard {
            live: Arc::clone(&self.live),
            id,
            done,
        })
    }

    /// Whether a client asked to cancel `id`.
    fn cancel_requested(&self, id: TaskId) -> bool {
        lock(&self.live)
            .get(&id)
            .is_some_and(|l| *l.cancel.borrow())
    }

    /// Turns true when a client asks to cancel `id`.
    fn cancel_watch(&self, id: TaskId) -> Option<watch::Receiver<bool>> {
        lock(&self.live).get(&id).map(|l| l.cancel.subscribe())
    }

    /// Notes that `run` works `id`; true when a cancel is already pending.
    fn attach_run(&self, id: TaskId, run: RunId) -> bool {
        lock(&self.live).get_mut(&id).is_some_and(|l| {
            l.run = Some(run);
            *l.cancel.borrow()
        })
    }

    /// The store, for event streams.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// `instance`'s task `id` with its newest event seq, in one snapshot.
    async fn owned_snapshot(&self, instance: &Instance, id: &str) -> Result<(Task, u64), A2aError> {
        let task_id: TaskId = id
            .parse()
            .map_err(|_| A2aError::TaskNotFound(id.to_owned()))?;
        let (owner, task, seq) = self
            .store
            .task_snapshot(task_id)
            .await
            .map_err(|e| store_error(e, id))?;
        // Another instance's task does not exist here.
        if owner != instance.name {
            return Err(A2aError::TaskNotFound(id.to_owned()));
        }
        Ok((task, seq))
    }

    async fn owned_task(&self, instance: &Instance, id: &str) -> Result<Task, A2aError> {
        let task_id: TaskId = id
            .parse()
            .map_err(|_| A2aError::TaskNotFound(id.to_owned()))?;
        let (owner, task) = self
            .store
            .get_task(task_id)
            .await
            .map_err(|e| store_error(e, id))?;
        // Another instance's task does not exist here.
        if owner != instance.name {
            return Err(A2aError::TaskNotFound(id.to_owned()));
        }
        Ok(task)
    }

    /// Records `message` as a new task (or as the next message of the live
    /// task it names). Returns the task as recorded, the seq of that event,
    /// and the message as stored (with its task and context ids).
    async fn admit(&self, instance: &Instance, mut message: Message) -> Result<Admitted, A2aError> {
        if message.role != Role::User {
            return Err(A2aError::InvalidParams {
                field: "message.role".into(),
                message: "a client sends user messages".into(),
            });
        }
        if let Runtime::Command(_) = instance.runtime {
            command::check_input(&message)?;
        }
        match message.task_id.clone() {
            Some(id) => {
                let task = self.owned_task(instance, &id).await?;
                if task.status.state.is_terminal() {
                    return Err(A2aError::UnsupportedOperation(format!(
                        "task {id} has ended ({}); send without taskId to start a new task",
                        task.status.state.as_str()
                    )));
                }
                // Reserved before the message is recorded: two follow-ups
                // cannot both be admitted.
                let guard = self.hold(task.id).ok_or_else(|| {
                    A2aError::UnsupportedOperation(match self.waiting_prompt(task.id) {
                        Some(p) => format!(
                            "task {id} waits for an answer to its prompt ({p}); answer it with the hitl-prompt/v1 envelope (prompt_id and text in message.metadata), or cancel it"
                        ),
                        None => format!(
                            "task {id} is still being worked ({}); wait for it to end or cancel it",
                            task.status.state.as_str()
                        ),
                    })
                })?;
                if message
                    .context_id
                    .as_ref()
                    .is_some_and(|c| *c != task.context_id)
                {
                    return Err(A2aError::InvalidParams {
                        field: "message.contextId".into(),
                        message: format!("task {id} belongs to context {}", task.context_id),
                    });
                }
                message.context_id = Some(task.context_id.clone());
                let (task, seq) = match self.store.add_task_message(task.id, message.clone()).await
                {
                    Ok(recorded) => recorded,
                    // It ended between the read and the write.
                    Err(StoreError::Rejected(_)) => {
                        return Err(A2aError::UnsupportedOperation(format!(
                            "task {id} has ended; send without taskId to start a new task"
                        )));
                    }
                    Err(e) => return Err(store_error(e, &id)),
                };
                Ok(Admitted {
                    task,
                    seq,
                    message,
                    guard,
                })
            }
            None => {
                let id = TaskId::new();
                let guard = self.hold(id).ok_or(A2aError::Internal)?;
                let context_id = message
                    .context_id
                    .clone()
                    .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
                message.task_id = Some(id.to_string());
                message.context_id = Some(context_id.clone());
                let task = Task {
                    id,
                    context_id,
                    status: status(TaskState::Submitted, None),
                    artifacts: vec![],
                    history: vec![message.clone()],
                    metadata: None,
                };
                let seq = self
                    .store
                    .create_task(&instance.name, task.clone())
                    .await
                    .map_err(|e| store_error(e, &id.to_string()))?;
                Ok(Admitted {
                    task,
                    seq,
                    message,
                    guard,
                })
            }
        }
    }

    /// Works the admitted task in a task of its own (a client that goes
    /// away cannot leave it half done); the receiver turns true when the
    /// work is over.
    fn run_in_background(&self, instance: &Instance, work: Work, admitted: Admitted) {
        let engine = self.clone();
        let instance = instance.clone();
        let Admitted {
            task,
            message,
            guard,
            ..
        } = admitted;
        let (task_id, context_id) = (task.id, task.context_id);
        tokio::spawn(async move {
            if let Err(e) = engine
                .run(&instance, &work, task_id, &context_id, &message)
                .await
            {
                tracing::error!(task = %task_id, error = ?e, "task run failed");
            }
            drop(guard);
        });
    }

    /// Watches the work on `id` (if any): over, or paused for the client.
    fn watch_work(&self, id: TaskId) -> Option<WorkWatch> {
        lock(&self.live).get(&id).map(|l| WorkWatch {
            done: l.done.clone(),
            interrupted: l.interrupted.subscribe(),
        })
    }

    /// Tells those waiting on `id` that its work paused for the client.
    fn interrupt(&self, id: TaskId) {
        if let Some(l) = lock(&self.live).get(&id) {
            l.interrupted.send_modify(|n| *n += 1);
        }
    }

    /// Waits until the work on `id` is over or paused for the client, then
    /// answers with the task as it is.
    async fn settled(
        &self,
        id: TaskId,
        mut watch: Option<WorkWatch>,
        history: Option<usize>,
    ) -> Result<Sent, A2aError> {
        loop {
            if let Some(w) = watch.as_mut() {
                w.paused_or_over().await;
            }
            // A run that failed was recorded as a failed task: answer with it,
            // so a client does not retry into a duplicate.
            let now = match self.store.get_task(id).await {
                Ok((_, now)) => now,
                Err(e) => return Err(store_error(e, &id.to_string())),
            };
            // A pause signalled for an earlier prompt can arrive after the
            // client already answered it: still working means not settled.
            let settled = watch.as_ref().is_none_or(WorkWatch::over)
                || now.status.state != TaskState::Working;
            if settled {
                return Ok(Sent::Task(trim_history(now, history)));
            }
        }
    }

    /// Starts a task for `message` (or continues the one it names) and
    /// answers with the task once it ended or was interrupted, or at once
    /// with `return_immediately`.
    pub async fn send(
        &self,
        instance: &Instance,
        message: Message,
        opts: SendOptions,
        ctx: &SendContext,
    ) -> Result<Sent, A2aError> {
        if let Some(reply) = direct_reply(instance, &message) {
            return Ok(Sent::Message(reply));
        }
        if prompts::answer_in(&message).is_some() {
            // Watched before the answer goes in, so a next prompt is seen.
            let watch = message
                .task_id
                .as_deref()
                .and_then(|t| t.parse().ok())
                .and_then(|t| self.watch_work(t));
            let id = self.answer_message(instance, message).await?;
            if opts.return_immediately {
                return self.settled(id, None, opts.history_length).await;
            }
            return self.settled(id, watch, opts.history_length).await;
        }
        let work = self.plan(instance, &message, ctx).await?;
        let admitted = self.admit(instance, message).await?;
        let task = admitted.task.clone();
        let watch = self.watch_work(task.id);
        self.run_in_background(instance, work, admitted);
        if opts.return_immediately {
            return Ok(Sent::Task(trim_history(task, opts.history_length)));
        }
        self.settled(task.id, watch, opts.history_length).await
    }

    /// Starts a task for a streaming send: returns the task as recorded and
    /// the seq after which its events follow; the work goes on meanwhile.
    pub async fn send_streaming(
        &self,
        instance: &Instance,
        message: Message,
        ctx: &SendContext,
    ) -> Result<Streamed, A2aError> {
        if !instance.streaming {
            return Err(no_streaming(instance));
        }
        if let Some(reply) = direct_reply(instance, &message) {
            return Ok(Streamed::Message(reply));
        }
        if prompts::answer_in(&message).is_some() {
            let id = self.answer_message(instance, message).await?;
            let (task, seq) = self.owned_snapshot(instance, &id.to_string()).await?;
            return Ok(Streamed::Task(task, seq));
        }
        let work = self.plan(instance, &message, ctx).await?;
        let admitted = self.admit(instance, message).await?;
        let (task, seq) = (admitted.task.clone(), admitted.seq);
        self.run_in_background(instance, work, admitted);
        Ok(Streamed::Task(task, seq))
    }

    /// The current task and the seq after which its later events follow,
    /// for a subscription; an ended task has nothing to subscribe to.
    pub async fn subscribe(&self, instance: &Instance, id: &str) -> Result<(Task, u64), A2aError> {
        if !instance.streaming {
            return Err(no_streaming(instance));
        }
        let (task, seq) = self.owned_snapshot(instance, id).await?;
        if task.status.state.is_terminal() {
            return Err(A2aError::UnsupportedOperation(format!(
                "task {id} has ended ({}); there is nothing to subscribe to",
                task.status.state.as_str()
            )));
        }
        Ok((task, seq))
    }

    /// A subscriber resuming after event `after`: the task (read with its
    /// newest seq in one snapshot). An id past the task's newest event is
    /// refused: the client cannot have seen it, and later events of the
    /// task with smaller ids would be skipped.
    pub async fn resume(
        &self,
        instance: &Instance,
        id: &str,
        after: u64,
    ) -> Result<Task, A2aError> {
        if !instance.streaming {
            return Err(no_streaming(instance));
        }
        let (task, newest) = self.owned_snapshot(instance, id).await?;
        if after > newest {
            return Err(A2aError::InvalidParams {
                field: "Last-Event-ID".into(),
                message: format!("{after} is past the last event of task {id} ({newest})"),
            });
        }
        Ok(task)
    }

    /// Works the task with the instance's runtime until it ends or is
    /// interrupted. If a step cannot be recorded, the task is ended as
    /// failed with the reason, never left looking alive.
    async fn run(
        &self,
        instance: &Instance,
        work: &Work,
        id: TaskId,
        context_id: &str,
        input: &Message,
    ) -> Result<(), A2aError> {
        let result = match (work, &instance.runtime) {
            (Work::Adapter(cmd), _) => self.adapter(instance, cmd, id, context_id, input).await,
            (Work::Runtime, Runtime::Echo) => self.echo(id, context_id, input).await,
            (Work::Runtime, Runtime::Command(c)) => {
                self.command(instance, c, id, context_id, input).await
            }
            (Work::Runtime, Runtime::Conformance) => self.conformance(id, context_id, input).await,
        };
        if let Err(e) = &result {
            let why = agent_message(
                id,
                context_id,
                vec![Part::text(format!(
                    "the task could not be run: {}",
                    e.message()
                ))],
            );
            match self
                .store
                .set_task_status(id, status(TaskState::Failed, Some(why)))
                .await
            {
                Ok(_) | Err(StoreError::Rejected(_)) => {}
                Err(e2) => {
                    tracing::error!(task = %id, error = %e2, "cannot record the failure of a task")
                }
            }
        }
        result
    }

    /// Saves a final status; a task that already ended keeps its ending.
    async fn record_end(&self, id: TaskId, end: TaskStatus) -> Result<(), A2aError> {
        match self.store.set_task_status(id, end).await {
            Ok(_) | Err(StoreError::Rejected(_)) => Ok(()),
            Err(e) => Err(store_error(e, &id.to_string())),
        }
    }

    /// At start-up: tasks a previous server left in flight have nothing
    /// running them any more (the runtimes are in-process), nor do tasks
    /// paused on a process's prompt (the process is gone); end them as
    /// failed, saying why. Returns how many.
    pub async fn settle_interrupted(&self) -> Result<usize, StoreError> {
        let mut lost: Vec<(TaskId, String, &str)> = self
            .store
            .live_tasks()
            .await?
            .into_iter()
            .map(|(id, ctx)| {
                (
                    id,
                    ctx,
                    "the server stopped while this task was in flight; its work was lost",
                )
            })
            .collect();
        for (id, ctx, paused) in self.store.paused_tasks().await? {
            let on_prompt = paused
                .message
                .as_ref()
                .and_then(|m| m.metadata.as_ref())
                .is_some_and(|m| m.contains_key(crate::adapter::HITL_URI));
            if on_prompt {
                lost.push((
                    id,
                    ctx,
                    "the server stopped while this task waited for an answer; the process that asked is gone",
                ));
            }
        }
        for (id, context_id, text) in &lost {
            let mut why = agent_message(*id, context_id, vec![Part::text(*text)]);
            let failure =
                serde_json::json!({ "kind": "infrastructure", "reason": "server_restart" });
            why.metadata = Some(serde_json::Map::from_iter([(
                "failure".to_owned(),
                failure,
            )]));
            match self
                .store
                .set_task_status(*id, status(TaskState::Failed, Some(why)))
                .await
            {
                Ok(_) | Err(StoreError::Rejected(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(lost.len())
    }

    /// `GetTask`.
    pub async fn get(
        &self,
        instance: &Instance,
        id: &str,
        history_length: Option<usize>,
    ) -> Result<Task, A2aError> {
        Ok(trim_history(
            self.owned_task(instance, id).await?,
            history_length,
        ))
    }

    /// `CancelTask`: an ended task cannot be canceled. A task being worked
    /// here is asked to stop and is answered once its work is over: a run's
    /// task reaches `canceled` only when its processes are gone, and one
    /// that finished first keeps its own ending. A task nothing works (one
    /// waiting for input) is canceled at once.
    pub async fn cancel(&self, instance: &Instance, id: &str) -> Result<Task, A2aError> {
        let task = self.owned_task(instance, id).await?;
        if task.status.state.is_terminal() {
            return Err(A2aError::TaskNotCancelable(format!(
                "task {id} has already ended ({})",
                task.status.state.as_str()
            )));
        }
        self.store
            .audit(
                &format!("a2a:{}", instance.name),
                "task.cancel",
                id,
                serde_json::json!({}),
            )
            .await
            .map_err(|e| store_error(e, id))?;
        let working = {
            let mut live = lock(&self.live);
            live.get_mut(&task.id).map(|l| {
                l.cancel.send_replace(true);
                (l.run, l.done.clone())
            })
        };
        if let Some((run, mut done)) = working {
            if let (Some(run), Some(runner)) = (run, &self.runner) {
                runner.stop(run);
            }
            let wait = self.grace.saturating_add(CANCEL_WAIT_MARGIN);
            let _ = tokio::time::timeout(wait, done.wait_for(|d| *d)).await;
            let now = self.owned_task(instance, id).await?;
            return match now.status.state {
                TaskState::Canceled => Ok(now),
                s if s.is_terminal() => Err(A2aError::TaskNotCancelable(format!(
                    "task {id} ended ({}) before the cancel landed",
                    s.as_str()
                ))),
                // Still going after the wait: say so rather than claim it.
                _ => Ok(now),
            };
        }
        match self
            .store
            .set_task_status(task.id, status(TaskState::Canceled, None))
            .await
        {
            Ok(_) => {}
            // It ended between the read and the write: that ending stands.
            Err(StoreError::Rejected(_)) => {
                return Err(A2aError::TaskNotCancelable(format!(
                    "task {id} ended before the cancel landed"
                )));
            }
            Err(e) => return Err(store_error(e, id)),
        }
        self.owned_task(instance, id).await
    }

    /// `ListTasks`.
    pub async fn list(&self, instance: &Instance, q: ListQuery) -> Result<ListResult, A2aError> {
        let page_size = q.page_size.unwrap_or(50);
        if !(1..=100).contains(&page_size) {
            return Err(A2aError::InvalidParams {
                field: "pageSize".into(),
                message: "must be from 1 to 100".into(),
            });
        }
        let page = self
            .store
            .list_tasks(&instance.name, q.filter, page_size, q.page_token)
            .await
            .map_err(|e| match e {
                StoreError::Rejected(c) => A2aError::InvalidParams {
                    field: "pageToken".into(),
                    message: c.to_string(),
                },
                other => store_error(other, ""),
            })?;
        let tasks = page
            .tasks
            .into_iter()
            .map(|mut t| {
                if !q.include_artifacts {
                    t.artifacts.clear();
                }
                trim_history(t, q.history_length)
            })
            .collect();
        Ok(ListResult {
            tasks,
            next_page_token: page.next_page_token.unwrap_or_default(),
            total_size: page.total_size,
            page_size,
        })
    }
}

/// The event a `task.status` / `task.artifact` log entry stands for.
pub fn event_from_log(
    task_id: TaskId,
    context_id: &str,
    kind: &str,
    body: &serde_json::Value,
) -> Option<TaskEvent> {
    match kind {
        "task.status" => Some(TaskEvent::Status {
            task_id,
            context_id: context_id.to_owned(),
            status: serde_json::from_value(body.get("status")?.clone()).ok()?,
        }),
        "task.artifact" => Some(TaskEvent::Artifact {
            task_id,
            context_id: context_id.to_owned(),
            artifact: serde_json::from_value(body.get("artifact")?.clone()).ok()?,
            append: body.get("append")?.as_bool()?,
            last_chunk: body.get("last_chunk")?.as_bool()?,
        }),
        _ => None,
    }
}
