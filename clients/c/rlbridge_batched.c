/* The agent server's batched calls (PROTOCOL.md 16.4, 16.7): AGENT_BATCH_INIT and
 * AGENT_BATCH_STEP on a single-instance agent, as the Python adapter (rlbridge/agents/batch.py)
 * does: the agent's start, step and end for each instance in instance order, each instance
 * with its own state (NEW, RUNNING, ENDED) and its own copy of the agent's per-instance bytes
 * (rlb_agent.instance_offset, instance_size), and "seed A" seeding each instance. */
#define _POSIX_C_SOURCE 200809L
#include "rlbridge_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char *live_bytes(const server *s) {
    return (unsigned char *)s->agent->state + s->agent->instance_offset;
}

/* Put `instance`'s own bytes into the agent's state, keeping the current instance's. */
static void switch_to(server *s, size_t instance) {
    size_t size = s->agent->instance_size;
    if (size == 0 || instance == s->batch.current || s->batch.count == 0)
        return;
    memcpy(s->batch.saved + s->batch.current * size, live_bytes(s), size);
    memcpy(live_bytes(s), s->batch.saved + instance * size, size);
    s->batch.current = instance;
}

int rlb_read_agent_batch_init(const msgpack_object *body, char **task_spec, size_t *count,
                              char *error) {
    int64_t number;
    *task_spec = NULL;
    if (body->type != MSGPACK_OBJECT_ARRAY || body->via.array.size != 2) {
        snprintf(error, RLB_ERROR_TEXT_BYTES, "AGENT_BATCH_INIT body must be [task_spec, "
                 "num_instances]; got %s", rlb_kind_name(body));
        return RLB_BAD_FIELD;
    }
    const msgpack_object *f = body->via.array.ptr;
    if (!rlb_read_i64(&f[1], &number)) {
        snprintf(error, RLB_ERROR_TEXT_BYTES, "num_instances must be an int; got %s",
                 rlb_kind_name(&f[1]));
        return RLB_BAD_FIELD;
    }
    if (number < 1 || number > (int64_t)RLB_MAX_AGENT_INSTANCES) {
        snprintf(error, RLB_ERROR_TEXT_BYTES, "AGENT_BATCH_INIT num_instances must be in 1..%u "
                 "(the instances this C agent answers for); got %lld", RLB_MAX_AGENT_INSTANCES,
                 (long long)number);
        return RLB_BAD_FIELD;
    }
    if (f[0].type != MSGPACK_OBJECT_STR) {
        snprintf(error, RLB_ERROR_TEXT_BYTES, "task spec must be a str; got %s",
                 rlb_kind_name(&f[0]));
        return RLB_BAD_FIELD;
    }
    *task_spec = malloc(f[0].via.str.size + 1);
    memcpy(*task_spec, f[0].via.str.ptr, f[0].via.str.size);
    (*task_spec)[f[0].via.str.size] = '\0';
    *count = (size_t)number;
    return RLB_OK;
}

void rlb_batch_restore(server *s) {
    switch_to(s, 0);
}

void rlb_batch_end(server *s) {
    rlb_batch_restore(s);
    free(s->batch.states);
    free(s->batch.saved);
    s->batch.states = NULL;
    s->batch.saved = NULL;
    s->batch.count = s->batch.current = 0;
}

int rlb_batch_init(server *s, const char *task_spec, size_t count, char *application) {
    const rlb_agent *agent = s->agent;
    rlb_batch_restore(s);
    if (agent->init != NULL && agent->init(agent->state, task_spec, application) != 0)
        return RLB_APPLICATION;
    rlb_batch_end(s);
    s->batch.states = calloc(count, 1);
    s->batch.saved = calloc(count, agent->instance_size ? agent->instance_size : 1);
    if (s->batch.states == NULL || s->batch.saved == NULL) {
        snprintf(application, RLB_ERROR_TEXT_BYTES, "no memory for %zu instances", count);
        rlb_batch_end(s);
        return RLB_APPLICATION;
    }
    /* Every instance starts from what init left: instance 0's bytes are the state's own. */
    for (size_t i = 1; i < count; i++)
        memcpy(s->batch.saved + i * agent->instance_size, live_bytes(s), agent->instance_size);
    s->batch.count = count;
    return RLB_OK;
}

void rlb_seed_agent(server *s, uint64_t seed) {
    const rlb_agent *agent = s->agent;
    if (agent->seed == NULL)
        return;
    if (s->state != BATCHED || agent->instance_size == 0) {
        agent->seed(agent->state, seed);
        return;
    }
    for (size_t i = 0; i < s->batch.count; i++) {
        switch_to(s, i);
        agent->seed(agent->state, rlb_instance_seed(seed, i));
    }
    switch_to(s, 0);
}

int rlb_seed_instance(server *s, uint64_t instance, uint64_t seed, char *error) {
    const rlb_agent *agent = s->agent;
    int batched = s->state == BATCHED && agent->instance_size != 0;
    size_t count = batched ? s->batch.count : 1;
    if (instance >= count) {
        snprintf(error, RLB_ERROR_TEXT_BYTES,
                 "query instance must be nil or in 0..%zu; got %llu", count - 1,
                 (unsigned long long)instance);
        return RLB_BAD_FIELD;
    }
    if (agent->seed == NULL)
        return RLB_OK;
    if (batched)
        switch_to(s, (size_t)instance);
    agent->seed(agent->state, seed);
    if (batched)
        switch_to(s, 0);
    return RLB_OK;
}

/* A copy of an action in one block, since the agent may reuse its buffers at the next call. */
static void *copy_value(const rlb_value *from, rlb_value *to) {
    size_t size = (from->n_ints + from->n_doubles) * 8 + from->n_arrays * sizeof(rlb_array);
    for (size_t p = 0; p < from->n_arrays; p++)
        size += from->arrays[p].nbytes;
    size_t n_chars = from->chars ? from->n_chars : 0;
    unsigned char *block = malloc(size + n_chars + 1);
    *to = *from;
    to->ints = (int64_t *)block;
    to->doubles = (double *)(to->ints + from->n_ints);
    to->arrays = (rlb_array *)(to->doubles + from->n_doubles);
    unsigned char *at = (unsigned char *)(to->arrays + from->n_arrays);
    if (from->n_ints)
        memcpy(to->ints, from->ints, from->n_ints * 8);
    if (from->n_doubles)
        memcpy(to->doubles, from->doubles, from->n_doubles * 8);
    for (size_t p = 0; p < from->n_arrays; p++) {
        to->arrays[p] = from->arrays[p];
        if (from->arrays[p].nbytes)
            memcpy(at, from->arrays[p].data, from->arrays[p].nbytes);
        to->arrays[p].data = at;
        at += from->arrays[p].nbytes;
    }
    if (n_chars)
        memcpy(at, from->chars, n_chars);
    to->chars = (const char *)at;
    to->n_chars = n_chars;
    return block;
}

static const char *const CALL_NAMES[] = {"STEP", "START", "END", "END_START", "NONE"};

/* The range and the instances' states (PROTOCOL.md 16.4), before any instance is touched. */
static int check_instances(const server *s, const rlb_agent_batch_step *request, char *error) {
    size_t n_calls = request->calls.shape[0];
    uint64_t first = (uint64_t)request->first_instance;
    if (first + n_calls > s->batch.count) {
        snprintf(error, RLB_ERROR_TEXT_BYTES, "AGENT_BATCH_STEP asks for instances %llu..%llu; "
                 "the agent answers for %zu instances (0..%zu, AGENT_BATCH_INIT)",
                 (unsigned long long)first, (unsigned long long)(first + n_calls - 1),
                 s->batch.count, s->batch.count - 1);
        return RLB_BAD_FIELD;
    }
    for (size_t offset = 0; offset < n_calls; offset++) {
        int call = request->calls.data[offset];
        int needs_episode = call == RLB_CALL_STEP || call == RLB_CALL_END
                            || call == RLB_CALL_END_START;
        if (needs_episode && s->batch.states[first + offset] == INSTANCE_NEW) {
            snprintf(error, RLB_ERROR_TEXT_BYTES, "instance %llu has no episode: its call must "
                     "be START or NONE; got %s", (unsigned long long)(first + offset),
                     CALL_NAMES[call]);
            return RLB_WRONG_STATE;
        }
    }
    return RLB_OK;
}

/* One instance's calls; the action, when the call gives one, into *action. */
static int call_agent(const rlb_agent *agent, int call, double reward,
                      const rlb_value *observation, rlb_value *action, char *application) {
    void *state = agent->state;
    if (call == RLB_CALL_STEP)
        return agent->step ? agent->step(state, reward, observation, action, application)
                           : agent->act(state, observation, action, application);
    if ((call == RLB_CALL_END || call == RLB_CALL_END_START) && agent->end != NULL
        && agent->end(state, reward, application) != 0)
        return 1;
    if (call == RLB_CALL_START || call == RLB_CALL_END_START)
        return agent->start ? agent->start(state, observation, action, application)
                            : agent->act(state, observation, action, application);
    return 0;
}

static const char *call_text(int call) {
    switch (call) {
    case RLB_CALL_STEP: return "agent_step";
    case RLB_CALL_START: return "agent_start";
    case RLB_CALL_END: return "agent_end";
    default: return "agent_end then agent_start";
    }
}

int rlb_batch_step(server *s, rlb_agent_batch_step *request, msgpack_packer *pk,
                   const rlb_array **frames, size_t *n_frames, size_t max_frames, char *error) {
    int code = check_instances(s, request, error);
    if (code != RLB_OK)
        return code;
    size_t n_calls = request->calls.shape[0], first = (size_t)request->first_instance;
    size_t n_actions = request->observations.count, taken = 0;
    rlb_value *actions = calloc(n_actions + 1, sizeof *actions);
    s->batch.reply_blocks = calloc(n_actions + 1, sizeof *s->batch.reply_blocks);
    for (size_t offset = 0; offset < n_calls; offset++) {
        int call = request->calls.data[offset];
        if (call == RLB_CALL_NONE)
            continue;
        switch_to(s, first + offset);
        char application[RLB_ERROR_TEXT_BYTES] = "";
        rlb_value action = {0};
        const rlb_value *observation = rlb_call_takes_observation(call)
                                           ? rlb_batch_value(&request->observations, taken)
                                           : NULL;
        if (call_agent(s->agent, call, rlb_column_f64(&request->rewards, offset), observation,
                       &action, application) != 0) {
            snprintf(error, RLB_ERROR_TEXT_BYTES, "agent raised %.400s (instance %zu, %s)",
                     application, first + offset, call_text(call));
            code = RLB_APPLICATION;
            break;
        }
        if (observation != NULL)
            s->batch.reply_blocks[s->batch.n_reply_blocks++] = copy_value(&action, &actions[taken++]);
    }
    if (code == RLB_OK) {
        for (size_t offset = 0; offset < n_calls; offset++) {
            int call = request->calls.data[offset];
            if (call != RLB_CALL_NONE)
                s->batch.states[first + offset] = call == RLB_CALL_END ? INSTANCE_ENDED
                                                                       : INSTANCE_RUNNING;
        }
        s->batch.reply_blocks[s->batch.n_reply_blocks++] =
            rlb_pack_batch(pk, actions, taken, frames, n_frames, max_frames);
    }
    free(actions);
    return code;
}

void rlb_batch_reply_sent(server *s) {
    for (size_t i = 0; i < s->batch.n_reply_blocks; i++)
        free(s->batch.reply_blocks[i]);
    free(s->batch.reply_blocks);
    s->batch.reply_blocks = NULL;
    s->batch.n_reply_blocks = 0;
}
