# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The shm role's settings and its plan for /dev/shm (see plans/_plan.py for the plan's shape).

The one home of the role's decision: the wanted size (_shm.wanted_size), what is kept (R10: never smaller than live
unless nodeprep_shm_shrink), what fstab must say so that the next boot keeps it, what the role refuses (a size
larger than RAM + swap), and what the readiness check ``shm.size`` reports (it passes exactly when this plan has no
drift).  Pure; no Ansible import.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._mounts import SHM_PATH, ShmError, round_pages
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._shm import (
    MAX_BYTES,
    SIZE_FORMS,
    SizeTooLarge,
    format_size as fmt,
    gpu_memory_bytes,
    parse_size,
    predict_before_gpu_memory,
    size_option,
    wanted_size,
)

ROLE = 'shm'
CHECK = 'shm.size'
CHECKS = (CHECK,)
FSTAB = '/etc/fstab'
PAGE = 4096
# /dev/shm counts as full below this much free space: 64 MiB, or 5% of its size when that is more.
FULL_FREE_BYTES = 64 * 1024 * 1024
FULL_FREE_RATIO = 0.05

SETTINGS = {
    'nodeprep_shm_size': {
        'type': 'raw', 'default': None,
        'description': [
            'Explicit size of C(/dev/shm); V(null) (or V(\'\')) derives it from the GPU memory '
            '(O(nodeprep_shm_gpu_memory_ratio), O(nodeprep_shm_min_size)).',
            'A number of bytes (V(68719476736); a fraction is cut to whole bytes), or a string - a number, with or '
            'without a decimal fraction, then an optional unit K, M, G, T or P in either case, which may be followed '
            'by B or iB. Every unit is base 1024, so V(512G), V(512g), V(512GB) and V(512GiB) are the same size; '
            'V(1.5T) is 1536 GiB; B alone means bytes (V(4096B)). Spaces around the number and the unit are allowed '
            '(V(64 G)).',
            'At least 1 byte, rounded up to a whole 4 KiB page. Anything else (V(-1G), V(64X), V(64ib), V(1e9), '
            'V(0), V(true)) is refused before anything changes, and so is a size larger than RAM + swap unless '
            'O(nodeprep_shm_allow_oversize) is true.']},
    'nodeprep_shm_gpu_memory_ratio': {
        'type': 'float', 'default': 0.5,
        'description': ["Derived size as a fraction of the node's total GPU memory (the article: at least half), "
                        'rounded up to a GiB; greater than 0.']},
    'nodeprep_shm_min_size': {
        'type': 'str', 'default': '64G',
        'description': 'Floor for the derived size, in the forms O(nodeprep_shm_size) takes (V(64G)); required.'},
    'nodeprep_shm_shrink': {
        'type': 'bool', 'default': False,
        'description': ['Also make a C(/dev/shm) that is larger than wanted (or unlimited) smaller, live and in fstab.',
                        'When false, neither the live size nor the fstab C(size=) is ever set below the live size (a '
                        'larger live size is kept and written to fstab; an unlimited one is left alone).']},
    'nodeprep_shm_allow_oversize': {
        'type': 'bool', 'default': False,
        'description': ['Allow a size larger than RAM + swap. tmpfs accepts it, but filling it would push the node '
                        'out of memory.']},
    'nodeprep_shm_mount_options': {
        'type': 'list', 'elements': 'str', 'default': ['nosuid', 'nodev'],
        'description': 'Mount options written to fstab besides C(size=).'},
    'nodeprep_shm_fstab': {
        'type': 'bool', 'default': True, 'description': 'Write the fstab entry (the size the next boot gives).'},
    'nodeprep_shm_remount': {
        'type': 'bool', 'default': True,
        'description': 'Remount C(/dev/shm) live when its size differs from the wanted one.'},
    'nodeprep_shm_path': {'type': 'path', 'default': SHM_PATH, 'description': 'The tmpfs mount point.'},
}


def gather(settings):
    request = _plan.new_gather()
    request['subsets'] = ['shm'] + (['nvidia'] if settings['nodeprep_shm_size'] is None else [])
    request['shm_path'] = settings['nodeprep_shm_path']
    return request


def read_size(plan, name, value, required):
    """Bytes of a size setting, or None (a problem is added when the value is not a size)."""
    if value is None or value == '':
        if required:
            _plan.add_problem(plan, name, value, 'required: ' + SIZE_FORMS)
        return None
    try:
        size = parse_size(value, name)
    except SizeTooLarge:
        _plan.add_problem(plan, name, value, 'larger than {0} bytes; allowed: {1}'.format(MAX_BYTES, SIZE_FORMS))
        return None
    except ShmError:
        _plan.add_problem(plan, name, value, 'not a size; allowed: ' + SIZE_FORMS)
        return None
    if size is None or size < 1:
        # tmpfs reads size=0 as no limit at all: never write it by accident.
        _plan.add_problem(plan, name, value, 'less than 1 byte (tmpfs would read size=0 as no limit); allowed: '
                          + SIZE_FORMS)
        return None
    return size


def check_settings(plan, settings):
    """Problems of the settings' values (their types are checked by the validator before)."""
    explicit = read_size(plan, 'nodeprep_shm_size', settings['nodeprep_shm_size'], required=False)
    floor = read_size(plan, 'nodeprep_shm_min_size', settings['nodeprep_shm_min_size'], required=True)
    ratio = settings['nodeprep_shm_gpu_memory_ratio']
    if ratio is None or not 0 < ratio < float('inf'):
        _plan.add_problem(plan, 'nodeprep_shm_gpu_memory_ratio', ratio, 'must be a number greater than 0 (0.5: half '
                          'of the GPU memory)')
    for option in settings['nodeprep_shm_mount_options']:
        if not option or ',' in option or option.startswith('size=') or any(c.isspace() for c in option):
            _plan.add_problem(plan, 'nodeprep_shm_mount_options', settings['nodeprep_shm_mount_options'],
                              'each item one mount option without commas or spaces (for example nosuid); size= '
                              'is written by the role')
            break
    path = settings['nodeprep_shm_path']
    if not path or not path.startswith('/'):
        _plan.add_problem(plan, 'nodeprep_shm_path', path, 'an absolute path such as /dev/shm')
    return explicit, floor


def _gpus(facts):
    nvidia = facts.get('nvidia') if isinstance(facts.get('nvidia'), dict) else {}
    return nvidia.get('gpus') or []


def nvidia_unreadable(facts):
    """Why the GPU memory cannot be read on a node that has GPUs on its PCI bus; None otherwise."""
    nvidia = facts.get('nvidia') if isinstance(facts.get('nvidia'), dict) else {}
    errors = facts.get('nodeprep_errors') if isinstance(facts.get('nodeprep_errors'), dict) else {}
    pci = ((facts.get('kernel_state') or {}).get('pci') or {}) if isinstance(facts.get('kernel_state'), dict) else {}
    if nvidia.get('present') and _gpus(facts):
        return None
    if pci.get('gpu_count') == 0:
        return None
    if errors.get('nvidia'):
        return 'nvidia-smi failed: {0}'.format(errors['nvidia'])
    if nvidia.get('error') and (pci.get('gpu_count') or nvidia.get('partial')):
        return 'nvidia-smi failed: {0}'.format(nvidia['error'])
    return None


def fstab_text(shm):
    """What the fstab line of /dev/shm says, for the report."""
    line = shm.get('fstab')
    if not isinstance(line, dict):
        return 'no fstab line (the next boot gives the tmpfs default, half of RAM: {0})'.format(
            fmt(shm.get('default_size_bytes')))
    if line.get('vfstype', 'tmpfs') != 'tmpfs':
        return 'fstab mounts it as {0}, not tmpfs'.format(line.get('vfstype'))
    if line.get('unlimited'):
        return 'fstab unlimited (size=0)'
    return 'fstab {0}{1}'.format(fmt(line.get('size_bytes')), '' if line.get('size_explicit', True) else
                                 ' (no size=: half of RAM)')


def plan(facts, settings, context):
    out = _plan.new_plan(ROLE)
    path = settings['nodeprep_shm_path']
    explicit, floor = check_settings(out, settings)
    if out['problems']:
        return out
    shm = facts.get('shm') if isinstance(facts.get('shm'), dict) else {}
    host = context.get('host') or 'this node'
    gpu_bytes = gpu_memory_bytes(gpu.get('memory_total_mib') for gpu in _gpus(facts))
    shrink = settings['nodeprep_shm_shrink']
    fstab_on = settings['nodeprep_shm_fstab']
    remount_on = settings['nodeprep_shm_remount']
    options = settings['nodeprep_shm_mount_options']
    min_bytes = round_pages(floor, PAGE)

    if explicit is None and not gpu_bytes:
        pending = context.get('driver_pending') is not None and context.get('check_mode') and not (
            (facts.get('nvidia') or {}).get('present'))
        if pending:
            return predict(out, shm, settings, min_bytes, host)
        unread = nvidia_unreadable(facts)
        if unread:
            # Not the shm role's fault, and nothing it can fix: readiness fails (driver checks say why).
            _plan.set_check(out, CHECK, '{0} sized from the GPU memory'.format(path), '')
            _plan.add_drift(out, CHECK, 'the size derives from the GPU memory, which cannot be read: ' + unread,
                            fixable=False)
            out['reports'].append('Skipping shm on {0}: nodeprep_shm_size is not set and the GPU memory cannot be '
                                  'read ({1}).'.format(host, unread))
            return out
        why = 'nodeprep_shm_size is not set and there is no GPU memory to derive the size from ({0})'.format(
            (facts.get('nvidia') or {}).get('error') or 'no NVIDIA GPU read')
        _plan.set_check(out, CHECK, '{0} sized from the GPU memory'.format(path), '', skip=why)
        out['reports'].append('Skipping shm on {0}: {1}.'.format(host, why))
        return out

    target = wanted_size(explicit, floor, settings['nodeprep_shm_gpu_memory_ratio'], gpu_bytes, PAGE)
    if explicit is not None:
        why = '{0} (nodeprep_shm_size)'.format(fmt(target))
    else:
        why = '{0} = max({1:g} x {2} of GPU memory, nodeprep_shm_min_size {3})'.format(
            fmt(target), settings['nodeprep_shm_gpu_memory_ratio'], fmt(gpu_bytes), fmt(min_bytes))
    expected = '{0} tmpfs of {1}{2}'.format(path, why, ', live and in fstab' if fstab_on else ' live')

    mounted = bool(shm.get('mounted')) and shm.get('fstype') == 'tmpfs'
    unlimited = bool(shm.get('unlimited'))
    live = shm.get('size_bytes') if mounted and not unlimited else None
    observed = 'live {0}, {1}'.format('unlimited' if unlimited else fmt(live) if mounted else 'not a mounted tmpfs',
                                      fstab_text(shm))
    _plan.set_check(out, CHECK, expected, observed)

    # Live.
    live_args = None
    if not mounted:
        text = '{0} is not a mounted tmpfs (mounted={1}, fstype={2})'.format(
            path, _plan.show(shm.get('mounted')), _plan.show(shm.get('fstype')))
        if remount_on:
            out['errors'].append('{0} on {1}.'.format(text, host))
        _plan.add_drift(out, CHECK, text, fixable=False)
    elif unlimited:
        if shrink:
            live_args = target
        else:
            out['reports'].append('{0} on {1} is unlimited live, more than the {2} wanted; it is kept (set '
                                  'nodeprep_shm_shrink=true to make it smaller).'.format(path, host, fmt(target)))
    elif live < target or (shrink and live > target):
        live_args = target
    elif live > target:
        out['reports'].append('{0} on {1} is {2} live, more than the {3} wanted; it is kept, and fstab keeps at '
                              'least that (set nodeprep_shm_shrink=true to make it smaller).'.format(
                                  path, host, fmt(live), fmt(target)))
    if live_args is not None:
        text = 'live: {0} is {1}, wanted {2}'.format(path, 'unlimited' if unlimited else fmt(live), fmt(target))
        if remount_on:
            _plan.add_drift(out, CHECK, text)
            out['args']['live'] = {'path': path, 'opts': 'size=' + size_option(target), 'state': 'remounted'}
        else:
            _plan.add_drift(out, CHECK, text + ' (live size not managed: nodeprep_shm_remount is false)',
                            fixable=False, level='warn')

    # fstab: the entry must keep at least what is wanted across a reboot (exactly it, with shrink), and never less
    # than a larger live size that is kept (R10).  An unlimited live size is kept live; fstab then gets the target
    # (without a line the next boot gives half of RAM, which may be less).  An unlimited fstab line is kept.
    if shrink:
        write = target
    elif live is not None and live > target:
        write = live
    else:
        write = target
    if fstab_on and mounted:
        line = shm.get('fstab') if isinstance(shm.get('fstab'), dict) else None
        reasons = []
        size_ok = False
        if line is None:
            reasons.append('no {0} line in fstab'.format(path))
        elif line.get('vfstype', 'tmpfs') != 'tmpfs':
            reasons.append('fstab mounts {0} as {1}, not tmpfs'.format(path, line.get('vfstype')))
        else:
            have = line.get('size_bytes')
            if line.get('unlimited'):
                size_ok = not shrink
            else:
                size_ok = have is not None and (have == write if shrink else have >= write)
            if not size_ok:
                reasons.append('fstab: {0} is {1} in fstab, wanted {2}'.format(
                    path, 'unlimited' if line.get('unlimited') else fmt(have), fmt(write)))
            lacking = [option for option in options if option not in (line.get('options') or [])]
            if lacking:
                reasons.append('fstab: the {0} line lacks {1}'.format(path, ','.join(lacking)))
        if reasons:
            # A line that already keeps enough (or no limit) keeps its size; the missing options are added.
            if size_ok:
                size_opt = 'size=0' if line.get('unlimited') else 'size=' + size_option(line['size_bytes'])
            else:
                size_opt = 'size=' + size_option(write)
            for reason in reasons:
                _plan.add_drift(out, CHECK, reason)
            out['args']['fstab'] = {'path': path, 'src': 'tmpfs', 'fstype': 'tmpfs',
                                    'opts': ','.join(list(options) + [size_opt]), 'state': 'present',
                                    'fstab': FSTAB}
    for error in shm.get('errors') or []:
        # A line tmpfs or mount would refuse: what the next boot does is unknown; the role does not edit other lines.
        _plan.add_drift(out, CHECK, error, fixable=False)

    # Full: stale segments of crashed jobs make NCCL's shared-memory transport and data loaders fail like network
    # timeouts.  No role run frees them.
    free = shm.get('free_bytes')
    if live and free is not None and free < max(FULL_FREE_BYTES, live * FULL_FREE_RATIO):
        _plan.add_drift(out, CHECK, 'full: only {0} free (stale segments of crashed jobs? see ls -la {1})'.format(
            fmt(free), path), fixable=False)

    # Never a size the node cannot hold, unless allowed.
    changes = [out['args'][key] for key in ('fstab', 'live') if key in out['args']]
    ram = shm.get('ram_bytes')
    if changes and ram and not settings['nodeprep_shm_allow_oversize']:
        limit = ram + (shm.get('swap_bytes') or 0)
        if target > limit:
            name = 'nodeprep_shm_size' if explicit is not None else 'nodeprep_shm_gpu_memory_ratio/nodeprep_shm_min_size'
            value = settings['nodeprep_shm_size'] if explicit is not None else '{0:g} x {1} of GPU memory, floor ' \
                '{2}'.format(settings['nodeprep_shm_gpu_memory_ratio'], fmt(gpu_bytes), settings['nodeprep_shm_min_size'])
            out['errors'].append('{0}={1} gives a /dev/shm of {2} bytes ({3}) on {4}, more than RAM + swap ({5} '
                                 'bytes). Set a smaller nodeprep_shm_size, or nodeprep_shm_allow_oversize=true to '
                                 'allow it anyway.'.format(name, _plan.show(value), target, size_option(target), host,
                                                           limit))
    out['args']['target'] = target
    out['args']['write'] = write
    return out


def predict(out, shm, settings, min_bytes, host):
    """Check mode before the driver installed in this run can report the GPU memory: only what changes whatever the
    GPU memory is (_shm.predict_before_gpu_memory), under the real tasks' names."""
    path = settings['nodeprep_shm_path']
    guess = predict_before_gpu_memory(shm, min_bytes, settings['nodeprep_shm_mount_options'],
                                      settings['nodeprep_shm_fstab'], settings['nodeprep_shm_remount'],
                                      settings['nodeprep_shm_shrink'])
    _plan.set_check(out, CHECK, '{0} sized from the GPU memory'.format(path), '',
                    skip='the GPU memory is read once the driver installed in this run loads')
    out['args']['predict'] = guess
    if guess['fstab']:
        out['reasons'].append('fstab: ' + '; '.join(guess['fstab_reasons']))
    if guess['live']:
        out['reasons'].append('live: ' + '; '.join(guess['live_reasons']))
    if not guess['exact']:
        out['reports'].append('Check mode on {0}: whether {1} changes beyond what is reported depends on the GPU '
                              'memory, which the driver installed in this run reads; the prediction may miss a '
                              'change.'.format(host, path))
    return out
