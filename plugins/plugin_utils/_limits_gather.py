# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE to the gpufleet.nodeprep collection; may change in any release.
#
# The controller's half of gpu_node_facts' ``limits`` subset: the node returns what it read (collect/_limits.py:
# {'read': ...}); the action plugins that run the gather (gpu_node_facts, node_plan) turn it into the ``limits``
# namespace with the same pure function limits_facts runs on the node (parsers/_limits_conf.resolve), so every
# reader of ansible_facts.limits sees one shape and the gather does not ship pam_limits' resolution.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._facts_module import facts_warnings
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._limits_conf import LimitsError, resolve


def resolve_gathered(facts, fail_on_error=True):
    """Resolve ``facts['limits']`` in place when it is what the node read.

    Returns ``(warnings, failure)``: the namespace's warnings and errors as task warnings (prefixed ``limits: ``, as
    the module gave them before), and the message to fail the task with (``fail_on_error``) or None.  Without
    ``fail_on_error`` a failure is ``nodeprep_errors.limits`` and the namespace is left out, as for every reader that
    fails.
    """
    limits = facts.get('limits')
    if not isinstance(limits, dict) or 'read' not in limits:
        return [], None
    try:
        facts['limits'] = resolve(limits['read'])
    except (LimitsError, KeyError, TypeError, ValueError) as exc:
        message = 'limits facts: {0}'.format(exc if isinstance(exc, LimitsError) else
                                             'the node\'s read cannot be resolved ({0}: {1})'.format(
                                                 type(exc).__name__, exc))
        del facts['limits']
        if fail_on_error:
            return [], message
        errors = facts.get('nodeprep_errors') if isinstance(facts.get('nodeprep_errors'), dict) else {}
        facts['nodeprep_errors'] = dict(errors, limits=message)
        return [], None
    return facts_warnings(facts['limits'], 'limits: '), None
