# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE to the gpufleet.nodeprep collection; may change in any release.
#
# The controller's half of gpu_node_facts' ``limits``, ``shm``, ``nic`` and ``imex`` subsets, of ``nvidia.topology``
# and of ``kernel_state.rdma``'s boot loader and modinfo reads: the
# node returns what it read ({'read': ...}: the files' text, bounded, and the commands' output), and the action
# plugins that run the gather (gpu_node_facts, node_plan, readiness_info) turn it into the namespace with the same
# pure functions the standalone facts modules run on the node (parsers/_limits_conf.resolve, parsers/_mounts.shm_facts,
# parsers/_nic_facts.nics_from_read, parsers/_imex_formats.imex_facts, parsers/_nvidia_smi_topo.topology_from_read,
# parsers/_rdma_reads.rdma_from_read),
# before any plan or check reads it.
# So every reader sees one shape and the gather ships none of these parsers.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._facts_module import facts_warnings, fail_kwargs
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._imex_formats import ImexError, imex_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._kernel import KernelError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._limits_conf import LimitsError, resolve
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._mounts import ShmError, shm_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_facts import nics_from_read
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_selection import NicError
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_topo import topology_from_read
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._rdma_reads import rdma_from_read


def _read_of(value):
    """The node's read of a namespace it returns as read (``{'read': ...}``), else None."""
    return value['read'] if isinstance(value, dict) and 'read' in value else None


def _rdma_read(value):
    rdma = value.get('rdma') if isinstance(value, dict) else None
    if isinstance(rdma, dict) and any(isinstance(rdma.get(k), dict) and 'read' in rdma[k]
                                      for k in ('boot_args', 'peermem_module')):
        return value
    return None


# namespace: (subset, what the node read (None: nothing to resolve), resolver (read, host) -> namespace, its error,
# whether its warnings are passed on (as the module gave them))
RESOLVERS = (
    ('kernel_state', 'kernel', _rdma_read, rdma_from_read, KernelError, False),
    ('limits', 'limits', _read_of, lambda read, host: resolve(read), LimitsError, True),
    ('shm', 'shm', _read_of, shm_facts, ShmError, True),
    ('nics', 'nic', _read_of, nics_from_read, NicError, False),
    ('imex', 'imex', _read_of, imex_facts, ImexError, False),
)


def resolve_gathered(facts, fail_on_error=True, host=None):
    """Resolve in place each of ``facts``' namespaces that is what the node read.

    Returns ``(warnings, failure)``: the namespaces' warnings and errors as task warnings (prefixed ``limits: ``,
    ``shm: ``, as the module gave them before), and what to fail the task with (``fail_on_error``; the first
    namespace that fails): the module's failure keys (``msg``, ``subset`` and, for a command's output that does not
    parse, ``cmd``, ``rc``, ``stdout``, ``stderr``), or None.  Without ``fail_on_error`` a failure is
    ``nodeprep_errors.<subset>`` and the namespace is left out, as for every reader that fails.
    """
    warnings = []
    nvidia = facts.get('nvidia')
    if isinstance(nvidia, dict) and isinstance(nvidia.get('topology'), dict) and 'read' in nvidia['topology']:
        # Never fails the gather: a topology that cannot be read is its ``error`` (gpu.topology fails with it).
        nvidia['topology'] = topology_from_read(nvidia['topology']['read'], host)
    for namespace, subset, read_of, resolver, error, warn in RESOLVERS:
        read = read_of(facts.get(namespace))
        if read is None:
            continue
        try:
            facts[namespace] = resolver(read, host)
        except (error, KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, error):
                failure = fail_kwargs(exc, '{0} facts: '.format(subset))
            else:
                failure = {'msg': '{0} facts: the node\'s read cannot be resolved{1} ({2}: {3})'.format(
                    subset, ' on host {0}'.format(host) if host else '', type(exc).__name__, exc)}
            del facts[namespace]
            if fail_on_error:
                return [], dict(failure, subset=subset)
            errors = facts.get('nodeprep_errors') if isinstance(facts.get('nodeprep_errors'), dict) else {}
            facts['nodeprep_errors'] = dict(errors, **{subset: failure['msg']})
            continue
        if warn:
            warnings.extend(facts_warnings(facts[namespace], '{0}: '.format(namespace)))
    return warnings, None
