# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Is this a GPU node?  The one rule that keeps the GPU roles off the login nodes, the Slurm controller and the
storage nodes of a whole-cluster inventory.

``decide(facts, value)`` reads the collection-wide setting ``nodeprep_gpu_node`` (SETTINGS below) and the PCI scan of
the gather (``ansible_facts.kernel_state.pci``, _kernel_state.scan_pci: NVIDIA display/3D controllers in sysfs):

============  ===========================  ===========  ============================================================
setting       PCI bus                      GPU node     why
============  ===========================  ===========  ============================================================
``false``     anything                     no           the setting says so
``true``      anything                     yes          the setting says so (cards not seated yet)
``auto``      1 or more NVIDIA GPUs        yes          the bus shows them
``auto``      0 NVIDIA GPUs                no           no NVIDIA GPU on the PCI bus
``auto``      not read (error, not asked)  yes          unknown: the roles run as before and say what they lack
============  ===========================  ===========  ============================================================

An unknown bus counts as a GPU node so that a failed read never silently leaves a GPU node unprepared.

The GPU roles (GPU_ROLES) are the ones whose work only makes sense with an NVIDIA GPU:

* ``nvidia_driver``, ``gpu_settings`` and ``nccl`` (the driver, the GPUs' settings, the GPU collective library);
* ``kernel``: in this collection it exists for the driver (the devel/headers of the booting kernel that DKMS builds
  against, an ELRepo kernel for driver support, a reboot into it); a login node keeps its own kernel;
* ``rdma``: the GPUDirect RDMA path (nvidia_peermem, ACS on the switch ports above GPUs and NICs);
* ``dcgm``: NVIDIA DCGM, the GPUs' health and diagnostics (its packages follow the CUDA major of the driver).

``memlock``, ``shm`` and ``nic_offload`` are not GPU roles: an MPI or RDMA job on a CPU node or a storage node needs
the same locked-memory limit, the same ``/dev/shm`` and the same NIC offloads, and each of those roles already says
when it has nothing to do (shm without a size and without GPUs, nic_offload with no NIC on its networks).

``apply(plan, decision, checks)`` turns a GPU role's plan on a node that is not a GPU node into a plan with no work:
no reasons, no files, no drift, no reboot; every readiness check the role owns skips with the reason; the one line is
``plan['gpu_skip']`` (also its only report, so the role imported alone says it), and ``run`` stays empty (site.yml
does not run the role there; its first play says the line once per node).  Settings problems stay: a value that
cannot be used is refused on every node it is given to.

Pure functions; no Ansible import (Python 3.6+: the readiness module imports this file on the node).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

NAME = 'nodeprep_gpu_node'
AUTO = 'auto'
GPU_ROLES = ('kernel', 'nvidia_driver', 'gpu_settings', 'nccl', 'rdma', 'dcgm')

# The collection-wide setting, in the SETTINGS of every GPU role (the inventory sets it once; not in any role's
# defaults: tests/unit/roles/test_role_settings.py SHARED).
SETTINGS = {
    NAME: {
        'type': 'raw', 'default': AUTO,
        'description': [
            ('The collection-wide switch (every GPU role reads it; the inventory sets it once) that says whether the '
             'node gets the work of the GPU roles (kernel, nvidia_driver, gpu_settings, nccl, rdma, dcgm).'),
            ('V(auto) (the default) where the PCI bus shows an NVIDIA GPU. A node without one (a login node, the '
             'Slurm controller, a storage node) gets none of their work, one line saying so, and their readiness '
             'checks skip.'),
            ('V(true) prepares the node as a GPU node although the bus shows none (before the cards are seated); '
             'V(false) never, whatever the bus shows.'),
            ('V(true) and V(false) may be written as Ansible writes booleans (V(yes)/V(no), V(on)/V(off), V(1)/V(0), '
             'as text or numbers); any other value is refused.'),
        ],
    },
}

# The booleans a bool setting takes (Ansible's own, ansible.module_utils.parsing.convert_bool BOOLEANS_TRUE and
# BOOLEANS_FALSE: text compared lower-cased and stripped, the numbers 1 and 0), so that nodeprep_gpu_node reads
# "0" and 0, "yes" and true alike, as every other setting typed by Ansible's validator does.
_TRUE = ('true', 'yes', 'on', 'y', 't', '1')
_FALSE = ('false', 'no', 'off', 'n', 'f', '0')
ALLOWED = ('allowed: auto, true or false (true and false also as Ansible reads booleans: yes/no, on/off, y/n, t/f, '
           '1/0 as text or numbers)')


def parse(value):
    """``nodeprep_gpu_node`` as 'auto', True or False; ValueError naming the value and what is allowed.  None and ''
    (the variable set to nothing) are auto."""
    if value is None:
        return AUTO
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return value == 1
    if isinstance(value, str):
        text = value.strip().lower()
        if text == AUTO or text == '':
            return AUTO
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ValueError('{0}={1!r}: {2}'.format(NAME, value, ALLOWED))


def pci_gpu_count(facts):
    """NVIDIA GPUs the gathered PCI scan shows, or None when the bus was not read."""
    facts = facts if isinstance(facts, dict) else {}
    state = facts.get('kernel_state')
    if not isinstance(state, dict) or state.get('error'):
        return None
    errors = facts.get('nodeprep_errors') if isinstance(facts.get('nodeprep_errors'), dict) else {}
    if 'kernel' in errors:
        return None
    pci = state.get('pci')
    if not isinstance(pci, dict) or not isinstance(pci.get('gpu_count'), int) or isinstance(pci.get('gpu_count'), bool):
        return None
    return pci['gpu_count']


def needs_pci(value):
    """Whether the rule must read the PCI bus (the kernel subset of the gather) for this setting."""
    try:
        return parse(value) == AUTO
    except ValueError:
        return False


def decide(facts, value):
    """``{'gpu': bool, 'why': words, 'problem': None or the refusal}`` for one node (see the table above)."""
    try:
        wanted = parse(value)
    except ValueError as exc:
        return {'gpu': True, 'why': 'invalid setting', 'problem': str(exc)}
    if wanted is True:
        return {'gpu': True, 'why': '{0} is true'.format(NAME), 'problem': None}
    if wanted is False:
        return {'gpu': False, 'why': '{0} is false'.format(NAME), 'problem': None}
    count = pci_gpu_count(facts)
    if count is None:
        return {'gpu': True, 'why': 'PCI bus not read: treated as a GPU node', 'problem': None}
    if count == 0:
        return {'gpu': False, 'why': 'no NVIDIA GPU on the PCI bus', 'problem': None}
    return {'gpu': True, 'why': '{0} NVIDIA GPU{1} on the PCI bus'.format(count, '' if count == 1 else 's'),
            'problem': None}


def skip_line(decision):
    """The one line a node that is not a GPU node gets."""
    return 'not a GPU node ({0}): no work of the GPU roles ({1}); set {2}: true for a node whose GPUs are not ' \
           'seated yet'.format(decision['why'], ', '.join(GPU_ROLES), NAME)


def apply(plan, decision, checks=()):
    """``plan`` of a GPU role after the rule: unchanged on a GPU node; without any work elsewhere (see the module's
    documentation).  ``checks``: the readiness checks the role owns.  Returns the plan."""
    plan['gpu_node'] = {'gpu': bool(decision['gpu']), 'why': decision['why']}
    if decision.get('problem') and decision['problem'] not in plan['problems']:
        plan['problems'].append(decision['problem'])
    if decision['gpu']:
        plan['gpu_skip'] = None
        return plan
    line = skip_line(decision)
    plan['gpu_skip'] = line
    plan['errors'] = []
    plan['reasons'] = []
    plan['drift'] = []
    plan['files'] = []
    plan['units'] = []
    plan['reports'] = [line]
    plan['reboot'] = {'needed': False, 'why': []}
    for check in checks:
        words = plan['checks'].get(check) or {}
        plan['checks'][check] = {'expected': words.get('expected') or 'a GPU node', 'observed': '',
                                 'skip': decision['why']}
    return plan


def from_plans(plans):
    """The decision recorded in the plans of the GPU roles (``plan['gpu_node']``), or None where no GPU role's plan
    has one (plans made before this rule, or none given).  A node is a GPU node when any GPU role's plan says so."""
    plans = plans if isinstance(plans, dict) else {}
    seen = [plans[role]['gpu_node'] for role in GPU_ROLES
            if isinstance(plans.get(role), dict) and isinstance(plans[role].get('gpu_node'), dict)]
    if not seen:
        return None
    for decision in seen:
        if decision.get('gpu'):
            return decision
    return seen[0]
