# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Rolling maintenance on a busy Slurm cluster (playbooks/rolling_upgrade.yml): the rules, as pure functions.

* Slurm's answers: :func:`parse_nodes` (``scontrol show node -o``), :func:`parse_jobs` (``squeue -h -o '%i|%T|%u'``),
  :func:`parse_config` (``scontrol show config``), :func:`parse_partitions` (``scontrol show partition -o``), read as
  Slurm 22.05 prints them (the captures in tests/unit/plugins/module_utils/slurm/).
* Our mark: the node's Slurm reason ``nodeprep:<run id>:<phase>`` (:func:`format_reason`, :func:`parse_reason`) and a
  file on the node (``MARKER``) written before the first drain, so that a node we took is known again on a rerun.
* Per node: :func:`node_status` (what Slurm says), :func:`decide` (the state of the node in this run: a candidate, a
  node another party holds, one we took earlier and where to pick it up), :func:`after_wait` (the busy policy),
  :func:`after_verify`; per run: :func:`batch_size`, :func:`batches`, :func:`preflight`, :func:`stop_run`.

No Ansible import (Python 3.6+).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _slurm_config

REASON_PREFIX = 'nodeprep'
# The phases a node of ours goes through, recorded in its reason (and in MARKER on the node).
PHASES = ('drain', 'work', 'reboot', 'verify', 'verify-failed')
# nodeprep_rolling_reboot: who reboots a node the kernel or driver needs rebooted: the roles (ansible.builtin.reboot
# on the node) or Slurm (``scontrol reboot nextstate=DOWN reason=nodeprep:<run id>:reboot <node>``, RebootProgram).
REBOOT_MODES = ('roles', 'slurm')
# What slurmctld 22.05 appends to a node's reason during `scontrol reboot` (set_node_reboot_reason in node_mgr.c:
# " : reboot issued" when it sends the reboot, " : reboot complete" when a nextstate=DOWN node registers again,
# " : reboot timed out" after ResumeTimeout).
SLURM_REBOOT_NOTES = ('reboot issued', 'reboot complete', 'reboot timed out')
# The per-node states of a run (docs/rolling-maintenance.md).
STATES = ('candidate', 'skipped-held', 'draining', 'drained', 'busy', 'work', 'verify', 'verify-failed', 'resumed',
          'done')
# Nodes the run does not drain: nothing to do there, or settings only (the settings roles run in place).
OUTSIDE = ('on-target', 'in-place')
BUSY_POLICIES = ('skip', 'wait', 'fail')
MARKER = '/var/lib/nodeprep/rolling-state'
RUN_ID_RE = re.compile(r'^[A-Za-z0-9._-]{1,64}$')
# The base states of `scontrol show node` (slurm_common.c node_state_string) and the flags we read.
USABLE_BASES = ('IDLE', 'MIXED', 'ALLOCATED')
BUSY_BASES = ('MIXED', 'ALLOCATED')
HELD_FLAGS = ('DRAIN', 'FAIL', 'NOT_RESPONDING', 'MAINTENANCE', 'REBOOT_REQUESTED', 'REBOOT_ISSUED',
              'POWERED_DOWN', 'POWERING_DOWN', 'POWERING_UP')
REBOOT_FLAGS = ('REBOOT_REQUESTED', 'REBOOT_ISSUED')
# Jobs that still hold a node (squeue's %T); PENDING jobs hold none.
ACTIVE_JOB_STATES = ('RUNNING', 'COMPLETING', 'CONFIGURING', 'SUSPENDED', 'STOPPED', 'SIGNALING', 'STAGE_OUT',
                     'RESV_DEL_HOLD', 'REQUEUE_FED', 'REQUEUE_HOLD', 'REQUEUED', 'RESIZING')
# squeue's output format the parser reads (job id, state, user), and the states it asks for.
SQUEUE_FORMAT = '%i|%T|%u'

_KEY_RE = re.compile(r'(?:^|\s)([A-Za-z][A-Za-z0-9_:/.]*)=')
# Slurm appends " [user@YYYY-MM-DDTHH:MM:SS]" to a reason set with scontrol (node_mgr.c _node_reason_str).
_REASON_TAIL_RE = re.compile(r'\s*\[[^\[\]@\s]+@[0-9T:-]+\]\s*$')
_SECONDS_RE = re.compile(r'^(\d+)\s*(?:sec)?$')
_PERCENT_RE = re.compile(r'^(\d+)\s*%$')


class RollingError(ValueError):
    """A setting or an answer of the backend that the run cannot use."""


# --- Slurm's answers -------------------------------------------------------------------------------------------

def parse_key_values(line):
    """``Key=Value`` pairs of one line of ``scontrol show ... -o``; a value runs until the next `` Key=``, so values
    with spaces (``OS=Linux 6.1.0 #1 SMP``, ``Reason=admin: bad fan [root@2026-01-02T03:04:05]``) stay whole."""
    out = {}
    matches = list(_KEY_RE.finditer(line))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out[m.group(1)] = line[m.end():end].strip()
    return out


def parse_nodes(text):
    """``scontrol show node -o`` (one node a line) -> {NodeName: {key: value}}; a line without NodeName is not a
    node (``No nodes in the system``)."""
    nodes = {}
    for line in (text or '').splitlines():
        if not line.strip():
            continue
        kv = parse_key_values(line.strip())
        if 'NodeName' in kv:
            nodes[kv['NodeName']] = kv
    return nodes


def parse_partitions(text):
    """``scontrol show partition -o`` -> {PartitionName: {key: value}}."""
    out = {}
    for line in (text or '').splitlines():
        kv = parse_key_values(line.strip())
        if 'PartitionName' in kv:
            out[kv['PartitionName']] = kv
    return out


def parse_config(text):
    """``scontrol show config``: ``Name = value`` lines -> {Name: value} (the one parser:
    parsers/_slurm_config.parse_show_config)."""
    return _slurm_config.parse_show_config(text)


def parse_seconds(value):
    """``600 sec`` (scontrol show config), ``600`` or ``GLOBAL``/``NONE`` -> int seconds, or None when not a
    number."""
    if value is None:
        return None
    m = _SECONDS_RE.match(str(value).strip())
    return int(m.group(1)) if m else None


def parse_jobs(text):
    """``squeue -h -o '%i|%T|%u'`` -> [{'id', 'state', 'user'}], in squeue's order."""
    jobs = []
    for line in (text or '').splitlines():
        line = line.strip()
        if not line:
            continue
        fields = line.split('|')
        if len(fields) < 2:
            raise RollingError('squeue printed {0!r}; expected the format {1}'.format(line, SQUEUE_FORMAT))
        jobs.append({'id': fields[0], 'state': fields[1], 'user': fields[2] if len(fields) > 2 else ''})
    return jobs


def active_jobs(jobs):
    """The ids of the jobs that still hold a node (running, completing...); pending ones hold none."""
    return [job['id'] for job in jobs if job['state'] in ACTIVE_JOB_STATES]


# --- our mark --------------------------------------------------------------------------------------------------

def check_run_id(run_id):
    if not isinstance(run_id, str) or not RUN_ID_RE.match(run_id):
        raise RollingError('nodeprep_rolling_run_id: {0!r} is not allowed; use 1 to 64 letters, digits, ".", "_" '
                           'or "-" (it goes into the Slurm reason nodeprep:<run id>:<phase>)'.format(run_id))
    return run_id


def format_reason(run_id, phase, checks=()):
    """``nodeprep:<run id>:<phase>``; ``verify-failed`` names the failed checks: ``...:verify-failed:a,b``."""
    check_run_id(run_id)
    if phase not in PHASES:
        raise RollingError('phase {0!r} is not one of {1}'.format(phase, ', '.join(PHASES)))
    reason = '{0}:{1}:{2}'.format(REASON_PREFIX, run_id, phase)
    if phase == 'verify-failed':
        reason += ':' + (','.join(checks) if checks else 'unknown')
    return reason


def strip_reason(reason):
    """A reason as set, without the `` [user@time]`` Slurm appends in ``scontrol show node``."""
    return _REASON_TAIL_RE.sub('', reason or '').strip()


def reboot_notes(reason):
    """The notes slurmctld appended to a reason during ``scontrol reboot`` (SLURM_REBOOT_NOTES), in order."""
    return [p.strip() for p in strip_reason(reason).split(' : ')[1:] if p.strip() in SLURM_REBOOT_NOTES]


def parse_reason(reason):
    """Our reason -> {'run_id', 'phase', 'checks', 'notes'}; None for any other reason (an admin's, Slurm's own).
    ``notes``: what slurmctld appended during our ``scontrol reboot`` (reboot_notes)."""
    text = strip_reason(reason)
    pieces = text.split(' : ')
    notes = [p.strip() for p in pieces[1:]]
    if any(n not in SLURM_REBOOT_NOTES for n in notes):
        return None
    text = pieces[0]
    parts = text.split(':')
    if len(parts) < 3 or parts[0] != REASON_PREFIX or not RUN_ID_RE.match(parts[1]) or parts[2] not in PHASES:
        return None
    if parts[2] == 'verify-failed':
        checks = [c for c in ':'.join(parts[3:]).split(',') if c]
    elif len(parts) != 3:
        return None
    else:
        checks = []
    return {'run_id': parts[1], 'phase': parts[2], 'checks': checks, 'notes': notes}


def parse_marker(text):
    """MARKER's content (``run_id phase held original-reason...``, one line) -> dict, or None when empty/absent."""
    line = (text or '').strip().splitlines()
    if not line:
        return None
    fields = line[0].split(' ', 3)
    if len(fields) < 3 or not RUN_ID_RE.match(fields[0]) or fields[1] not in PHASES + ('taken',):
        return None
    return {'run_id': fields[0], 'phase': fields[1], 'held': fields[2] == 'held',
            'original_reason': fields[3] if len(fields) > 3 else ''}


def format_marker(run_id, phase, held=False, original_reason=''):
    check_run_id(run_id)
    return '{0} {1} {2} {3}\n'.format(run_id, phase, 'held' if held else 'ours', original_reason or '').rstrip() \
        + '\n'


# --- one node --------------------------------------------------------------------------------------------------

def node_status(record):
    """What Slurm says of a node (a record of parse_nodes): base state, flags, reason, ours, held, drained."""
    state = record.get('State', '')
    parts = [p for p in state.split('+') if p]
    base = parts[0].rstrip('*~#!%$@^-') if parts else 'UNKNOWN'
    flags = parts[1:]
    reason = strip_reason(record.get('Reason', ''))
    if reason in ('none', '(null)'):
        reason = ''
    ours = parse_reason(reason)
    drain = 'DRAIN' in flags
    completing = 'COMPLETING' in flags or base == 'COMPLETING'
    reboot = [f for f in flags if f in REBOOT_FLAGS]
    held = base in ('DOWN', 'FUTURE', 'UNKNOWN', 'ERROR') or any(f in HELD_FLAGS for f in flags) or \
        (bool(reason) and ours is None)
    usable = base in USABLE_BASES and not any(f in HELD_FLAGS for f in flags)
    return {
        'state': state,
        'base': base,
        'flags': flags,
        'reason': reason,
        'ours': ours,
        'drain': drain,
        # DRAINED in sinfo: drained and no job left (IDLE+DRAIN, DOWN+DRAIN); MIXED/ALLOCATED+DRAIN is DRAINING.
        'drained': drain and base not in BUSY_BASES and not completing,
        'reboot_pending': bool(reboot),
        'held': held and ours is None,
        'usable': usable,
        'partitions': [p for p in record.get('Partitions', '').split(',') if p],
    }


def disruptive(plans):
    """Whether a node's plans need it drained: the kernel or nvidia_driver plan has reasons or a reboot."""
    out = []
    for role in ('kernel', 'nvidia_driver'):
        plan = (plans or {}).get(role) or {}
        out.extend('{0}: {1}'.format(role, r) for r in plan.get('reasons') or [])
        if (plan.get('reboot') or {}).get('needed'):
            why = (plan.get('reboot') or {}).get('why') or ['reboot']
            out.extend('{0}: reboot ({1})'.format(role, w) for w in why)
    return out


def settings_work(plans):
    """The settings roles' reasons (they run in place, without a drain)."""
    out = []
    for role, plan in sorted((plans or {}).items()):
        if role in ('kernel', 'nvidia_driver') or not isinstance(plan, dict):
            continue
        out.extend('{0}: {1}'.format(role, r) for r in plan.get('run') or [])
    return out


def decide(name, plans, marker, record, options):
    """The state of one node at the start of a run.

    ``plans``: ansible_facts.nodeprep_plans of the node; ``marker``: parse_marker of MARKER on the node (or None);
    ``record``: its parse_nodes record (None: Slurm was not asked, or does not know the node); ``options``:
    ``include_held``, ``retry_failed``.  Returns {'node', 'state', 'start', 'why', 'changes', 'ours', 'held',
    'original_reason', 'slurm_state'}; ``start`` is the first step to run: drain, wait, work, verify or None.
    """
    changes = disruptive(plans)
    settings = settings_work(plans)
    out = {'node': name, 'changes': changes or settings, 'disruptive': bool(changes), 'ours': False, 'held': False,
           'original_reason': '', 'slurm_state': None, 'start': None, 'why': ''}
    if not changes and marker is None:
        out['state'] = 'in-place' if settings else 'on-target'
        out['why'] = 'settings only: run in place, not drained' if settings else 'nothing to do'
        return out
    if record is None:
        out['state'] = 'skipped-held'
        out['why'] = 'Slurm does not know the node (scontrol show node gave no record)'
        return out
    status = node_status(record)
    out['slurm_state'] = status['state']
    ours = status['ours']
    if ours is not None:
        # Ours (this run's or an interrupted one's): pick it up at its recorded phase; never drained again.
        out['ours'] = True
        phase = ours['phase']
        if phase == 'drain':
            out.update(state='draining', start='wait', why='drained by run {0}: wait until empty'.format(
                ours['run_id']))
        elif phase == 'work':
            out.update(state='work', start='work', why='run {0} stopped in work: work again'.format(ours['run_id']))
        elif phase == 'reboot':
            # The roles are idempotent; reboot_step then waits for a reboot still pending, never asks a second one.
            out.update(state='work', start='work', why='run {0} stopped in its Slurm reboot ({1}): work again'.format(
                ours['run_id'], ', '.join(ours['notes']) or 'requested'))
        elif phase == 'verify':
            out.update(state='verify', start='verify', why='run {0} stopped in verify'.format(ours['run_id']))
        elif options.get('retry_failed'):
            out.update(state='work', start='work', why='failed verification in run {0} ({1}): retried'.format(
                ours['run_id'], ','.join(ours['checks'])))
        else:
            out.update(state='verify', start='verify', why='failed verification in run {0} ({1}): verify '
                       'only (nodeprep_rolling_retry_failed retries the work)'.format(
                           ours['run_id'], ','.join(ours['checks'])))
        return out
    if marker is not None and marker['held']:
        # A held node we worked on earlier (include_held): its state is not ours; go on from the marker.
        out.update(held=True, original_reason=status['reason'], state='work' if marker['phase'] == 'work' else
                   'verify' if marker['phase'] in ('verify', 'verify-failed') else 'candidate',
                   start='work' if marker['phase'] in ('work', 'taken', 'drain') else 'verify',
                   why='held node worked on by run {0}; its state and reason are left as they are'.format(
                       marker['run_id']))
        return out
    if status['held']:
        why = 'held by someone else: State={0}{1}'.format(
            status['state'], ' Reason={0}'.format(status['reason']) if status['reason'] else '')
        if status['reboot_pending']:
            why += ' (reboot pending)'
        if not options.get('include_held'):
            out.update(state='skipped-held', why=why + '; nodeprep_rolling_include_held works on it')
            return out
        out.update(state='candidate', start='wait', held=True, original_reason=status['reason'],
                   why=why + '; worked on (include_held) without taking its state: never resumed by us')
        return out
    if not changes:
        # The marker is ours but Slurm shows no reason of ours (lost, or the run stopped before the drain) and the
        # plans have nothing disruptive left: nothing to drain for.
        out.update(state='on-target', why='marker of run {0} left, nothing disruptive to do'.format(
            marker['run_id']))
        return out
    out.update(state='candidate', start='drain', why='disruptive work: drain, work, verify, resume')
    return out


def after_wait(decision, jobs, timed_out, policy):
    """The state after waiting for a node to empty: 'drained', or under the busy policy 'busy' (skip: resume it if
    ours), 'draining' (wait: keep waiting) or 'failed' (fail: stop the run)."""
    if policy not in BUSY_POLICIES:
        raise RollingError('nodeprep_rolling_busy: {0!r} is not one of {1}'.format(policy, ', '.join(BUSY_POLICIES)))
    if not jobs:
        return 'drained'
    if not timed_out or policy == 'wait':
        return 'draining'
    return 'busy' if policy == 'skip' else 'failed'


def reboot_how(mode, held):
    """Who reboots a node of the run (nodeprep_rolling_reboot): 'roles' or 'slurm'.

    A held node (include_held) is always rebooted by the roles: ``scontrol reboot nextstate=DOWN`` would clear its
    DRAIN flag and append to its reason (scontrol.1 of 22.05, ``reboot``), and its state is not ours to change."""
    if mode not in REBOOT_MODES:
        raise RollingError('nodeprep_rolling_reboot: {0!r} is not one of {1}'.format(mode, ', '.join(REBOOT_MODES)))
    return 'roles' if held else mode


def reboot_step(record, reboot_required):
    """The next step of a Slurm reboot for one node of ours, from its record (parse_nodes):

    * 'none': the roles asked for no reboot and no reboot of ours is under way;
    * 'request': ask Slurm (``scontrol reboot nextstate=DOWN reason=nodeprep:<run id>:reboot``);
    * 'wait': a reboot is requested or issued (REBOOT_REQUESTED / REBOOT_ISSUED), or issued and not yet complete;
    * 'complete': the node registered again after our reboot (``reboot complete``, DOWN, no reboot flag);
    * 'timed-out': slurmctld gave up (``reboot timed out``: not registered within ResumeTimeout).
    A reboot already asked in an earlier run is waited for, never asked a second time."""
    status = node_status(record)
    ours = status['ours']
    notes = ours['notes'] if ours else []
    under_way = ours is not None and ours['phase'] == 'reboot'
    if under_way and 'reboot timed out' in notes:
        return 'timed-out'
    if status['reboot_pending']:
        return 'wait'
    if under_way and 'reboot complete' in notes:
        return 'complete'
    if under_way:
        # Asked, not issued yet or issued and the node not registered: the flags tell; without them and without a
        # note Slurm dropped the request (State=RESUME cancels it): ask again only if the roles still need it.
        if 'reboot issued' in notes:
            return 'wait'
        return 'request' if reboot_required else 'none'
    return 'request' if reboot_required else 'none'


def may_resume(record, run_id_any=True):
    """Whether we may resume a node: its current reason is ours and no reboot is pending (State=RESUME would cancel
    it)."""
    status = node_status(record)
    return status['ours'] is not None and not status['reboot_pending']


def back_in_service(record):
    """IDLE, MIXED or ALLOCATED without DRAIN/DOWN/FAIL: the node takes jobs again."""
    return node_status(record)['usable']


def failed_checks(checks):
    """The ids of the readiness checks that failed (readiness_info's checks)."""
    return [c.get('id', '?') for c in checks or [] if c.get('status') == 'fail']


def stop_run(failed_count, max_failed):
    """The run stops when more than nodeprep_rolling_max_failed nodes failed verification."""
    return failed_count > max_failed


# --- the run ---------------------------------------------------------------------------------------------------

def batch_size(batch, count):
    """nodeprep_rolling_batch (a count, or a percentage of the nodes to work on) -> nodes per batch, as Ansible's
    ``serial`` computes it (a percentage rounds down, at least 1)."""
    text = str(batch).strip()
    m = _PERCENT_RE.match(text)
    if m:
        pct = int(m.group(1))
        if pct < 1 or pct > 100:
            raise RollingError('nodeprep_rolling_batch: {0!r} is not allowed; a percentage is 1% to 100%'.format(
                batch))
        return max(1, int(pct / 100.0 * count))
    if isinstance(batch, bool) or not text.isdigit() or int(text) < 1:
        raise RollingError('nodeprep_rolling_batch: {0!r} is not allowed; give a count (1 or more) or a percentage '
                           '("25%")'.format(batch))
    return int(text)


def batches(names, batch):
    """The nodes to work on, in order, cut into batches."""
    names = list(names)
    if not names:
        return []
    size = batch_size(batch, len(names))
    return [names[i:i + size] for i in range(0, len(names), size)]


def preflight(config, partitions, records, batch_list, reboot_timeout, min_available):
    """The reasons the run must not start (empty: go on).

    ``config``: parse_config; ``partitions``: parse_partitions; ``records``: parse_nodes of every node Slurm knows;
    ``batch_list``: batches of the nodes to drain; ``reboot_timeout``: the longest reboot timeout of the roles, in
    seconds; ``min_available``: usable nodes each partition must keep during a batch.
    """
    problems = []
    global_timeout = parse_seconds(config.get('ResumeTimeout'))
    if global_timeout is None:
        problems.append('scontrol show config gave no ResumeTimeout (got {0!r})'.format(config.get('ResumeTimeout')))
    elif batch_list and global_timeout < reboot_timeout:
        problems.append('ResumeTimeout={0} s (slurm.conf) is shorter than the reboot timeout {1} s '
                        '(nodeprep_kernel_reboot_timeout, nodeprep_nvidia_driver_reboot_timeout): a node still '
                        'rebooting would be marked DOWN; raise ResumeTimeout or lower the reboot timeouts'.format(
                            global_timeout, reboot_timeout))
    members = {}
    for name, record in records.items():
        for part in node_status(record)['partitions']:
            members.setdefault(part, []).append(name)
    worked = set(n for b in batch_list for n in b)
    for part, kv in sorted(partitions.items()):
        if not worked.intersection(members.get(part, [])):
            continue
        timeout = parse_seconds(kv.get('ResumeTimeout'))
        if timeout is not None and timeout < reboot_timeout:
            problems.append('partition {0}: ResumeTimeout={1} s is shorter than the reboot timeout {2} s'.format(
                part, timeout, reboot_timeout))
    for i, batch in enumerate(batch_list):
        for part in sorted(members):
            nodes = members[part]
            if not set(batch).intersection(nodes):
                continue
            usable = [n for n in nodes if node_status(records[n])['usable'] and n not in batch]
            if len(usable) < min_available:
                problems.append('batch {0} ({1}) would leave partition {2} with {3} usable node(s) ({4}); '
                                'nodeprep_rolling_min_available is {5}'.format(
                                    i + 1, ', '.join(batch), part, len(usable), ', '.join(usable) or 'none',
                                    min_available))
    return problems


def summary(changes):
    """``nvidia_driver: x; nvidia_driver: reboot (y); shm: z`` -> ``nvidia_driver (2, reboot), shm (1)``."""
    roles = []
    counts = {}
    reboot = set()
    for change in changes:
        role, _sep, what = change.partition(': ')
        if role not in counts:
            roles.append(role)
            counts[role] = 0
        if what.startswith('reboot ('):
            reboot.add(role)
        else:
            counts[role] += 1
    return ', '.join('{0} ({1}{2})'.format(r, counts[r], ', reboot' if r in reboot else '') for r in roles) or '-'


def table(decisions, batch_of, jobs):
    """Rows of the plan table: node, state, what changes, Slurm state, jobs, batch, why."""
    rows = []
    for d in decisions:
        rows.append({
            'node': d['node'],
            'state': d['state'],
            'changes': summary(d['changes']),
            'slurm': d['slurm_state'] or '-',
            'jobs': ','.join(jobs.get(d['node']) or []) or '-',
            'batch': batch_of.get(d['node'], '-'),
            'why': d['why'],
        })
    return rows


def format_table(rows):
    """The plan table as text (one line a node)."""
    heads = ('node', 'state', 'batch', 'slurm', 'jobs', 'changes')
    cells = [[str(r[h]) for h in heads] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(heads)]
    lines = ['  '.join(h.ljust(widths[i]) for i, h in enumerate(heads)).rstrip()]
    for c in cells:
        lines.append('  '.join(c[i].ljust(widths[i]) for i in range(len(heads))).rstrip())
    return '\n'.join(lines) + '\n'


def plan_run(nodes, slurm, options):
    """The whole plan of a run.

    ``nodes``: [{'node', 'plans', 'marker'}] in play order (``marker``: MARKER's text or None); ``slurm``: the
    backend's state answer ({'records', 'config', 'partitions', 'jobs'}) or None when it was not asked;
    ``options``: run_id, batch, include_held, retry_failed, min_available, reboot_timeout, busy, max_failed,
    reboot (REBOOT_MODES; each decision of a node worked on gets ``reboot``: reboot_how).
    Returns {'need_slurm': nodes Slurm must be asked about, 'decisions', 'work': nodes to take through the run in
    order, 'batches', 'batch_of', 'rows', 'text', 'problems'}.  With ``slurm`` None only ``need_slurm`` counts.
    """
    check_run_id(options['run_id'])
    if options.get('busy', 'skip') not in BUSY_POLICIES:
        raise RollingError('nodeprep_rolling_busy: {0!r} is not one of {1}'.format(
            options.get('busy'), ', '.join(BUSY_POLICIES)))
    reboot_mode = options.get('reboot', 'roles')
    if reboot_mode not in REBOOT_MODES:
        raise RollingError('nodeprep_rolling_reboot: {0!r} is not one of {1}'.format(
            reboot_mode, ', '.join(REBOOT_MODES)))
    for key in ('min_available', 'max_failed', 'reboot_timeout'):
        value = options.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise RollingError('nodeprep_rolling_{0}: {1!r} is not allowed; give a whole number, 0 or more'.format(
                key, value))
    need = [n['node'] for n in nodes if disruptive(n['plans']) or parse_marker(n.get('marker')) is not None]
    out = {'need_slurm': need, 'decisions': [], 'work': [], 'batches': [], 'batch_of': {}, 'rows': [], 'text': '',
           'problems': []}
    if slurm is None and need:
        return out
    records = (slurm or {}).get('records') or {}
    decisions = []
    for n in nodes:
        marker = parse_marker(n.get('marker'))
        record = records.get(n['node']) if slurm is not None else None
        d = decide(n['node'], n['plans'], marker, record, options)
        d['marker'] = format_marker(options['run_id'], 'taken', d['held'], d['original_reason']) \
            if d['start'] else ''
        d['reboot'] = reboot_how(reboot_mode, d['held']) if d['start'] else None
        decisions.append(d)
    work = [d['node'] for d in decisions if d['start']]
    batch_list = batches(work, options.get('batch', 1))
    batch_of = dict((name, i + 1) for i, b in enumerate(batch_list) for name in b)
    # Only the nodes we drain leave a partition; held and already-drained nodes count as not usable anyway.
    to_drain = [[name for name in b if next(d for d in decisions if d['node'] == name)['start'] == 'drain']
                for b in batch_list]
    problems = preflight((slurm or {}).get('config') or {}, (slurm or {}).get('partitions') or {}, records,
                         [b for b in to_drain if b], options.get('reboot_timeout', 0),
                         options.get('min_available', 0)) if work else []
    jobs = (slurm or {}).get('jobs') or {}
    rows = table(decisions, batch_of, jobs)
    out.update(decisions=decisions, work=work, batches=batch_list, batch_of=batch_of, rows=rows,
               text=format_table(rows), problems=problems)
    return out
